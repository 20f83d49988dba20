"""The Serve application: ``build_app(args)`` and a default ``app`` from the environment.

    serve run serve.app:build_app store=/path/to/store            # args as key=value
    serve deploy serve/config.yaml                                # production config
    mnemoray serve --store /path/to/store                         # local, blocking
    MNEMORAY_STORE=/path serve run serve.app:app                  # env-configured

Graph (default ``index_mode: ingress``)::

    proxy -> MemoryIngress (FastAPI; query embedder + index in-process)
                 |-- Embedder    (@serve.batch; bulk embedding of writes)
                 '-- Summarizer  (session-end distillation)

``index_mode: deployment`` adds ``Index`` (shards multiplexed by shard id) between
the ingress and the store; see ``serve/deployments.py``.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

from ray.serve import Application

from mnemoray.embedders import KEYWORD_ONLY_SPECS
from serve.auth import ApiKeys, load_api_keys
from serve.deployments import Embedder, Index, Summarizer
from serve.ingress import MemoryIngress
from serve.settings import ServeSettings, parse_settings, settings_from_env

log = logging.getLogger(__name__)

APP_NAME = "mnemoray"
SERVE_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
             "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0"}


def resolve_keys(settings: ServeSettings) -> ApiKeys:
    """The key set: ``api_keys`` (a file path or a mapping), else ``$MNEMORAY_API_KEYS``."""
    if isinstance(settings.api_keys, Mapping):
        return ApiKeys.from_mapping(settings.api_keys, "api_keys")
    return load_api_keys(settings.api_keys)


def build_app(args: Mapping[str, Any] | ServeSettings | None = None) -> Application:
    """The application for ``args`` (see ``serve.settings.ServeSettings``)."""
    s = parse_settings(args)
    keys = resolve_keys(s)
    # Replicas get digests only: plain keys never leave the process that read them.
    config = s.model_dump()
    config["api_keys"] = None
    config["api_key_digests"] = keys.to_digests()
    cpus = s.num_cpus
    embedder = None
    if s.embedder_deployment and s.embedder.strip().lower() not in KEYWORD_ONLY_SPECS:
        embedder = Embedder.options(
            num_replicas=s.embedder_replicas,
            ray_actor_options={"num_cpus": cpus.embedder}).bind(s.store, s.embedder)
    summarizer = None
    if s.summarizer_deployment:
        summarizer = Summarizer.options(
            num_replicas=s.summarizer_replicas,
            ray_actor_options={"num_cpus": cpus.summarizer}).bind(s.summarizer,
                                                                  s.summarizer_options)
    index = None
    if s.index_mode == "deployment":
        index = Index.options(
            num_replicas=s.index_replicas,
            ray_actor_options={"num_cpus": cpus.index}).bind(config, embedder, summarizer)
    return MemoryIngress.options(
        num_replicas=s.replicas, max_ongoing_requests=s.max_ongoing_requests,
        ray_actor_options={"num_cpus": cpus.ingress},
    ).bind(config, embedder, summarizer, index)


def __getattr__(name: str) -> Any:
    # ``serve run serve.app:app``: built on first access from MNEMORAY_* variables,
    # so importing this module (tests, build_app users) reads no environment.
    if name == "app":
        return build_app(settings_from_env())
    raise AttributeError(name)


def run_local(args: Mapping[str, Any], *, host: str = "127.0.0.1", port: int = 8000,
              ready: Any = None) -> None:
    """Start a local Ray + Serve and run the app until Ctrl-C (``mnemoray serve``)."""
    import ray
    from ray import serve

    settings = parse_settings(args)
    keys = resolve_keys(settings)
    if keys.open and host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"host: refusing to bind {host} without API keys; configure "
                         f"--api-keys (or MNEMORAY_API_KEYS) or bind 127.0.0.1")
    if not ray.is_initialized():
        env = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        # Serve's own per-request overhead, documented knobs (part of Ray Serve's
        # RAY_SERVE_THROUGHPUT_OPTIMIZED preset): user code on the replica's main
        # loop and the router on the proxy's loop save two thread hand-offs per
        # request (measured here: replica CPU per /healthz ~1.2 ms with them). The
        # caller's environment wins.
        for key, value in SERVE_ENV.items():
            env[key] = os.environ.get(key, value)
        ray.init(include_dashboard=False, log_to_driver=True,
                 runtime_env={"env_vars": env})
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(settings), name=APP_NAME, route_prefix="/")
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
