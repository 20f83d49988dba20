"""The HTTP API without Ray: the FastAPI app, API keys, the error mapping, the routes,
and the parts one server is built of; ``LocalBackend`` serves it in one process
(``mnemoray ui``), ``mnemoray.serve`` in Ray Serve replicas."""

from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import ApiBackend, HttpConfig
from mnemoray.http.local_backend import LocalBackend
from mnemoray.http.metrics import Metrics

__all__ = ["ApiBackend", "ApiKeys", "HttpConfig", "LocalBackend", "Metrics", "build_api"]
