"""The serving configuration: what ``build_app(args)`` accepts (also from env vars).

``serve run serve.app:build_app store=/path replicas=2`` passes every value as a
string; pydantic's lax mode turns "2" into 2 and "true" into True. Unknown keys are
an error naming the key, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mnemoray.memory.triggers import TRIGGER_TYPES, TriggerConfig

ENV_PREFIX = "MNEMORAY_"
MiB = 1 << 20


class SettingsError(ValueError):
    """The serving configuration is invalid; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TriggerSettings(_Strict):
    """When a session becomes memories (``mnemoray.memory.triggers``)."""

    type: Literal["session_end", "inactivity", "message_count"] = "session_end"
    inactivity_s: float = Field(1800.0, ge=0)
    message_count: int = Field(20, ge=1)
    # How often an ``inactivity`` trigger scans for idle sessions.
    poll_interval_s: float = Field(60.0, gt=0)

    def config(self) -> TriggerConfig:
        return TriggerConfig(type=self.type, inactivity_s=self.inactivity_s,
                             message_count=self.message_count)


class CpuSettings(_Strict):
    """``ray_actor_options.num_cpus`` per replica. Fractions so that the default app
    (ingress + Embedder + Summarizer) fits a 2-CPU machine with room to spare."""

    ingress: float = Field(0.5, ge=0)
    embedder: float = Field(0.25, ge=0)
    summarizer: float = Field(0.1, ge=0)
    index: float = Field(0.25, ge=0)


class ServeSettings(_Strict):
    store: str = Field(..., min_length=1, description="memory store directory")
    sessions_db: str | None = Field(None, description="SQLite file (default STORE/sessions.db)")
    artifacts_dir: str | None = Field(None, description="artifacts (default STORE/artifacts)")
    shards: int | None = Field(None, ge=1, description="shards of a NEW store")
    embedder: str = Field("default", min_length=1,
                          description="load_embedder spec: default, onnx, a path, none")
    query_embedder: str = Field(
        "auto", min_length=1,
        description="spec of the in-process query embedder: 'auto' = the ONNX Runtime "
        "build of the packaged MiniLM when `embedder` is the packaged MiniLM (same "
        "model_id, parity-gated; ~4x faster for one query), else the `embedder` spec")
    query_threads: int | None = Field(None, ge=1, description="intra-op threads of the "
                                      "ONNX query embedder (default: ONNX Runtime's)")
    summarizer: str = Field("extractive", min_length=1)
    summarizer_options: dict[str, Any] = Field(default_factory=dict)
    trigger: TriggerSettings = Field(default_factory=TriggerSettings)

    # -- deployments --------------------------------------------------------------
    replicas: int = Field(1, ge=1, description="ingress replicas")
    # "ingress": the index lives in each ingress replica (one hop: the default).
    # "deployment": shards live in a separate Index deployment, multiplexed by shard id.
    index_mode: Literal["ingress", "deployment"] = "ingress"
    index_replicas: int = Field(1, ge=1)
    embedder_deployment: bool = Field(True, description="bulk embedding of writes in a "
                                      "separate Embedder deployment (else in-process)")
    embedder_replicas: int = Field(1, ge=1)
    summarizer_deployment: bool = Field(True, description="session distillation's "
                                        "summarizer in a separate deployment")
    summarizer_replicas: int = Field(1, ge=1)
    num_cpus: CpuSettings = Field(default_factory=CpuSettings)
    max_ongoing_requests: int = Field(128, ge=1, description="per ingress replica; the "
                                      "micro-batcher needs concurrent requests to batch")

    # -- hot path -------------------------------------------------------------------
    batch_max_size: int = Field(16, ge=1, le=256)
    batch_wait_timeout_s: float = Field(0.002, ge=0, le=0.1)
    offload_search: bool = Field(False, description="run index search in a thread "
                                 "instead of on the event loop")
    encode_in_loop: bool = Field(True, description="encode query batches on the event "
                                 "loop (true) or on a dedicated encoder thread (false)")
    reload_interval_s: float = Field(0.25, gt=0, le=60)

    # -- security & limits ----------------------------------------------------------
    api_keys: str | dict[str, Any] | None = Field(
        None, description="API keys: a JSON file path or the mapping itself")
    api_key_digests: dict[str, list[str]] | None = Field(
        None, description="internal: hashed keys, filled in by build_app")
    allow_remote_without_keys: bool = False
    max_body_bytes: int = Field(8 * MiB, ge=1024)

    @field_validator("store", "sessions_db", "artifacts_dir")
    @classmethod
    def _expand(cls, v: str | None) -> str | None:
        return None if v is None else str(Path(v).expanduser().absolute())

    @property
    def sessions_path(self) -> str:
        return self.sessions_db or str(Path(self.store) / "sessions.db")

    @property
    def artifacts_path(self) -> str:
        return self.artifacts_dir or str(Path(self.store) / "artifacts")


def parse_settings(args: Mapping[str, Any] | ServeSettings | None) -> ServeSettings:
    if isinstance(args, ServeSettings):
        return args
    try:
        return ServeSettings.model_validate(dict(args or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "args"
        raise SettingsError(f"serve config: {where}: {first['msg']}") from None


_ENV_KEYS = ("store", "sessions_db", "artifacts_dir", "shards", "embedder", "query_embedder",
             "summarizer",
             "replicas", "index_mode", "index_replicas", "embedder_deployment",
             "summarizer_deployment", "batch_max_size", "batch_wait_timeout_s",
             "offload_search", "reload_interval_s", "max_body_bytes")


def settings_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Args from ``MNEMORAY_STORE``, ``MNEMORAY_EMBEDDER``, ... (``MNEMORAY_<KEY>``).

    ``MNEMORAY_STORE`` defaults to ``./mnemoray-store``; ``MNEMORAY_TRIGGER`` is the
    trigger type. API keys come from ``MNEMORAY_API_KEYS`` (see ``serve.auth``).
    """
    env = os.environ if env is None else env
    args: dict[str, Any] = {k: env[ENV_PREFIX + k.upper()] for k in _ENV_KEYS
                            if env.get(ENV_PREFIX + k.upper())}
    args.setdefault("store", "mnemoray-store")
    trigger = env.get(ENV_PREFIX + "TRIGGER")
    if trigger:
        if trigger not in TRIGGER_TYPES:
            raise SettingsError(f"{ENV_PREFIX}TRIGGER: {trigger!r} is not one of "
                                f"{', '.join(TRIGGER_TYPES)}")
        args["trigger"] = {"type": trigger}
    return args


def direct_ingress_env(port: int, replicas: int) -> dict[str, str]:
    """Ray Serve's throughput preset with direct ingress, replica ports from ``port + 1``.

    ``RAY_SERVE_THROUGHPUT_OPTIMIZED=1`` turns on Serve's direct ingress (each ingress
    replica runs its own HTTP server: a request skips the proxy hop and the body
    round trip between replica and proxy), gRPC between deployments and user code on
    the replica's main loop. Measured here at 1M memories (benchmarks/README.md, one run):
    single-client recall p50 23.9 -> 11.1 ms, 32 clients 98.7 -> 206.3 req/s.
    """
    first = port + 1
    return {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
            "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(first),
            "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(first + 4 * max(1, replicas) + 16)}
