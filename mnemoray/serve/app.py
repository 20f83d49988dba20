"""The Serve application: ``build_app(args)`` and a default ``app`` from the environment.

    serve run mnemoray.serve.app:build_app store=/path server.ingress=proxy   # key=value args
    serve run mnemoray.serve.app:build_app config=/etc/mnemoray.yaml       # a settings file
    serve deploy mnemoray/serve/config.yaml                                # production config
    mnemoray serve --store /path/to/store                         # local, blocking
    MNEMORAY_STORE=/path MNEMORAY_SERVER__INGRESS=proxy serve run mnemoray.serve.app:app

``serve run`` starts Serve's HTTP proxy on port 8000 itself: without ``server.ingress``
the replicas then use it (``ingress_mode``); ``server.ingress=direct`` needs another
``server.port`` for the replicas' own servers.

Settings: ``mnemoray.settings.serve`` (flags > MNEMORAY_* environment > file > defaults).

Graph (default ``index_mode: ingress``, ``ingress: direct``)::

    client -> MemoryIngress (FastAPI on its own HTTP server, host:port; query embedder +
                 |           index in-process; ``ingress: proxy``: Serve's proxy in front)
                 |-- Embedder    (@serve.batch; bulk embedding of writes)
                 '-- Summarizer  (session-end distillation)

``server.index_mode: deployment`` adds ``Index`` (shards multiplexed by shard id) between
the ingress and the store; see ``mnemoray/serve/deployments.py``.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

from ray.serve import Application

from mnemoray.embedders import EmbedderSpec
from mnemoray.http.auth import resolve_keys
from mnemoray.ray_local import start_ray
from mnemoray.serve.deployments import Embedder, Index, Summarizer
from mnemoray.serve.ingress import MemoryIngress
from mnemoray.settings.serve import ServeSettings, SettingsError, load_settings

log = logging.getLogger(__name__)

APP_NAME = "mnemoray"
SERVE_ENV = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
}


def settings_of(args: Mapping[str, Any] | ServeSettings | None) -> ServeSettings:
    """``args`` are the flags layer over the environment and the settings file."""
    return args if isinstance(args, ServeSettings) else load_settings(args)


def build_app(args: Mapping[str, Any] | ServeSettings | None = None) -> Application:
    """The application for ``args`` (see ``mnemoray.settings.serve``)."""
    s = settings_of(args)
    keys = resolve_keys(s)
    # Replicas get the resolved settings and digests only: plain keys never leave
    # the process that read them, and replicas read no environment.
    config = s.model_dump()
    config["server"]["api_keys"] = None
    config["server"]["api_key_digests"] = keys.to_digests()
    cpus, models = s.server.num_cpus, s.models
    embedder = None
    if (
        models.embedder_deployment
        and not EmbedderSpec.parse(models.embedder, field="models.embedder").keyword_only
    ):
        embedder = Embedder.options(  # type: ignore[attr-defined]  # mypy ignores class decorators (a Deployment)
            num_replicas=models.embedder_replicas, ray_actor_options={"num_cpus": cpus.embedder}
        ).bind(s.store, models.embedder)
    summarizer = None
    if models.summarizer_deployment:
        summarizer = Summarizer.options(  # type: ignore[attr-defined]  # mypy ignores class decorators (a Deployment)
            num_replicas=models.summarizer_replicas, ray_actor_options={"num_cpus": cpus.summarizer}
        ).bind(models.summarizer, models.summarizer_options)
    index = None
    if s.server.index_mode == "deployment":
        index = Index.options(  # type: ignore[attr-defined]  # mypy ignores class decorators (a Deployment)
            num_replicas=s.server.index_replicas, ray_actor_options={"num_cpus": cpus.index}
        ).bind(config, embedder, summarizer)
    # Whether some layer chose server.ingress: if none did, the replicas keep Serve's
    # proxy when a Serve config runs one (mnemoray.serve.ingress_mode).
    chosen = "ingress" in s.server.model_fields_set
    return MemoryIngress.options(  # type: ignore[attr-defined]  # mypy ignores class decorators (a Deployment)
        num_replicas=s.server.replicas,
        max_ongoing_requests=s.server.max_ongoing_requests,
        ray_actor_options={"num_cpus": cpus.ingress},
    ).bind(config, embedder, summarizer, index, ingress_chosen=chosen)


def __getattr__(name: str) -> Any:
    # ``serve run mnemoray.serve.app:app``: built on first access from MNEMORAY_* variables,
    # so importing this module (tests, build_app users) reads no environment.
    if name == "app":
        return build_app(None)
    raise AttributeError(name)


def serve_env() -> dict[str, str]:
    """Environment for the Ray processes of a local Serve app (the caller's wins)."""
    env = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **SERVE_ENV}
    return {key: os.environ.get(key, value) for key, value in env.items()}


class _NoProxyUrl(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "is ready at http" not in record.getMessage()


def run_local(
    args: Mapping[str, Any] | ServeSettings, *, ready: Any = None, address: str | None = None
) -> None:
    """Start a local Ray + Serve and run the app until Ctrl-C (``mnemoray serve``).

    Clients connect to ``server.host:server.port``. ``server.ingress: direct`` (the
    default): the ingress replicas answer there themselves (``replica_http``) and
    Serve's HTTP proxy is not started; ``proxy``: Serve's proxy binds it.
    ``address="local"`` always starts a new Ray instance (benchmarks).
    """
    import ray
    from ray import serve

    settings = settings_of(args)
    keys = resolve_keys(settings)
    host, port = settings.server.host, settings.server.port
    if keys.open and host not in ("127.0.0.1", "localhost", "::1"):
        raise SettingsError(
            f"refusing to bind {host} without API keys; configure "
            f"server.api_keys or bind 127.0.0.1",
            field="server.host",
        )
    if not ray.is_initialized():
        # Serve's own per-request overhead, documented knobs (part of Ray Serve's
        # RAY_SERVE_THROUGHPUT_OPTIMIZED preset): user code on the replica's main
        # loop and the router on the proxy's loop save two thread hand-offs per
        # request.
        start_ray(address, serve_env())
    if settings.server.ingress == "direct":
        serve.start(proxy_location="Disabled")
        # Serve would announce its (absent) proxy's URL; the CLI printed the real one.
        logging.getLogger("ray.serve").addFilter(_NoProxyUrl())
    else:
        serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(settings), name=APP_NAME, route_prefix="/")
    print(f"mnemoray: ready on http://{host}:{port}", flush=True)
    if ready is not None:
        ready(keys)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and `kill` both shut Serve down cleanly (a background job may even have
    # started with SIGINT ignored).
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        log.info("mnemoray: shutting down")
    finally:
        serve.shutdown()
