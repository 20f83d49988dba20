"""The HTTP API without Ray: the FastAPI app, API keys, the error mapping, the routes,
and the parts one server is built of; ``LocalBackend`` serves it in one process
(``mnemoray ui``), ``mnemoray.serve`` in Ray Serve replicas."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "ApiBackend": "mnemoray.http.backend",
    "ApiKeys": "mnemoray.http.auth",
    "HttpConfig": "mnemoray.http.backend",
    "LocalBackend": "mnemoray.http.local_backend",
    "Metrics": "mnemoray.http.metrics",
    "build_api": "mnemoray.http.app",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
