"""The groups of the serving configuration (``mnemoray.settings.serve.ServeSettings``): one
pydantic model per group, strict (an unknown key is an error naming it)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mnemoray.artifacts.files import SUPPORTED as ARTIFACTS
from mnemoray.artifacts.offload import DEFAULT_THRESHOLD_BYTES
from mnemoray.limits import MAX_SYNC_EMBED_CHARS
from mnemoray.locations import local_location
from mnemoray.memory.ingest.triggers import TriggerConfig
from mnemoray.memory.store.ops.merge_policy import DEFAULT_AFTER_SEGMENTS, DEFAULT_SMALL_ROWS
from mnemoray.postgres import is_postgres_url
from mnemoray.sessions.backends import SUPPORTED as SESSIONS
from mnemoray.settings.jobs import JobSettings

log = logging.getLogger(__name__)

MiB = 1 << 20


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TriggerSettings(StrictModel):
    """When a session becomes memories (``mnemoray.memory.ingest.triggers``)."""

    type: Literal["session_end", "inactivity", "message_count"] = "session_end"
    inactivity_s: float = Field(1800.0, ge=0)
    message_count: int = Field(20, ge=1)
    # How often an ``inactivity`` trigger scans for idle sessions.
    poll_interval_s: float = Field(60.0, gt=0)

    def config(self) -> TriggerConfig:
        return TriggerConfig(
            type=self.type, inactivity_s=self.inactivity_s, message_count=self.message_count
        )


class CpuSettings(StrictModel):
    """``ray_actor_options.num_cpus`` per replica. Fractions so that the default app
    (ingress + Embedder + Summarizer) fits a 2-CPU machine with room to spare."""

    ingress: float = Field(0.5, ge=0)
    embedder: float = Field(0.25, ge=0)
    summarizer: float = Field(0.1, ge=0)
    index: float = Field(0.25, ge=0)


class ServerSettings(StrictModel):
    """HTTP, replicas, limits, keys and the index layout."""

    # host/port: what clients connect to. ingress "direct": the ingress replicas serve
    # them themselves (mnemoray.serve.replica_http; Serve's proxy is not started by
    # `mnemoray serve`). "proxy": Serve's HTTP proxy does (`mnemoray serve` binds it
    # there; under `serve deploy` the Serve config's http_options decide). Given by no
    # layer, ingress is direct unless Serve's proxy runs (mnemoray.serve.ingress_mode).
    host: str = Field(
        "127.0.0.1", min_length=1, description="interface to bind; non-loopback only with API keys"
    )
    port: int = Field(8000, ge=1, le=65535)
    ingress: Literal["direct", "proxy"] = Field(
        "direct",
        description="direct: the ingress replicas answer HTTP on host:port "
        "themselves (one node; replicas share the port); proxy: Serve's HTTP proxy "
        "answers and routes to replicas anywhere (clusters behind a load balancer)",
    )
    replicas: int = Field(1, ge=1, description="ingress replicas")
    max_ongoing_requests: int = Field(
        128,
        ge=1,
        description="per ingress replica; the query encoder batches concurrent requests",
    )
    num_cpus: CpuSettings = Field(default_factory=CpuSettings)
    # "ingress": the index lives in each ingress replica (one hop: the default).
    # "deployment": shards live in a separate Index deployment, multiplexed by shard id.
    index_mode: Literal["ingress", "deployment"] = "ingress"
    index_replicas: int = Field(1, ge=1)
    offload_search: bool = Field(
        False, description="run index search in a thread instead of on the event loop"
    )
    reload_interval_s: float = Field(0.25, gt=0, le=60)
    api_keys: str | dict[str, Any] | None = Field(
        None, description="API keys: a JSON file path or the mapping itself"
    )
    api_key_digests: dict[str, list[str]] | None = Field(
        None, description="internal: hashed keys, filled in by build_app"
    )
    allow_remote_without_keys: bool = False
    max_body_bytes: int = Field(8 * MiB, ge=1024)
    # Slow clients (mnemoray.http.connection_guard), on the servers mnemoray runs itself
    # (direct ingress, `mnemoray ui`); Serve's proxy (ingress: proxy) has no such limits
    # (docs/serving.md, "Exposure").
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="a request's line and headers must arrive within this many seconds "
        "(of the connection's start, or of a later request's first byte); else 408",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="longest wait between two reads of a request body; else 408",
    )
    max_connections_per_client: int = Field(
        64,
        ge=0,
        description="open connections per client address (loopback too; per replica); "
        "one more is answered 503 and closed (0: no cap)",
    )
    max_sync_embed_chars: int = Field(
        MAX_SYNC_EMBED_CHARS,
        ge=1,
        description="characters one synchronous add may ask to embed (memories' key "
        "text, a session's event text); past it 413: smaller requests, or ?wait=false "
        "for a session",
    )
    offload_bytes: int = Field(
        DEFAULT_THRESHOLD_BYTES,
        ge=0,
        description="tool results "
        "over this many bytes are stored as artifacts when appended "
        "(0: off)",
    )
    docs: bool | None = Field(
        None,
        description="serve /docs, /redoc and /openapi.json "
        "(without a key); default: only when no API keys are set",
    )

    @model_validator(mode="before")
    @classmethod
    def _direct_ingress(cls, data: Any) -> Any:
        return direct_ingress_as_ingress(data) if isinstance(data, dict) else data


def direct_ingress_as_ingress(server: dict[str, Any]) -> dict[str, Any]:
    """One layer's ``server`` group with the deprecated ``direct_ingress`` read as the
    ``ingress`` it asked for.

    Earlier versions: ``direct_ingress: true`` (replicas on their own ports from port+1,
    the proxy on port) or false (the proxy); the replicas now answer on ``port`` itself.
    ``load_settings`` applies this to each layer before layering them, so a higher
    layer's ``ingress`` overrides a lower layer's ``direct_ingress``; both in one layer
    and disagreeing is an error (ValueError).
    """
    if "direct_ingress" not in server:
        return server
    server = dict(server)
    old = server.pop("direct_ingress")
    if isinstance(old, str):
        old = old.strip().lower() in ("1", "true", "yes", "on")
    wanted = "direct" if old else "proxy"
    if server.setdefault("ingress", wanted) != wanted:
        raise ValueError(
            f"direct_ingress ({old}) contradicts ingress "
            f"({server['ingress']}); direct_ingress is deprecated: give "
            f"ingress only"
        )
    log.warning(
        "server.direct_ingress is deprecated: use server.ingress: %s (with "
        "direct, the replicas now answer on server.port itself)",
        wanted,
    )
    return server


class AppIngestionSettings(StrictModel):
    """One app's overrides of how its sessions become memories."""

    summarize: bool | None = Field(None, description="override of ingestion.summarize")


class WriteSettings(StrictModel):
    """How the server keeps online writes' segments few
    (``mnemoray.memory.store.ops.background_merge``)."""

    merge_after_segments: int = Field(
        DEFAULT_AFTER_SEGMENTS,
        ge=0,
        description="small segments in one shard that start a background merge (0: never; "
        "then only `mnemoray compact` merges them)",
    )
    small_segment_rows: int = Field(
        DEFAULT_SMALL_ROWS, ge=1, description="a segment under this many rows counts as small"
    )

    @field_validator("merge_after_segments")
    @classmethod
    def _not_one(cls, v: int) -> int:
        if v == 1:
            raise ValueError("1 would merge a lone segment into itself: use 0 (never) or >= 2")
        return v


class IngestionSettings(StrictModel):
    """How sessions become memories and where sessions and artifacts live."""

    trigger: TriggerSettings = Field(default_factory=TriggerSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)  # retries, retention
    sessions_db: str | None = Field(
        None,
        description="sessions and jobs: a SQLite file (default STORE/sessions.db, jobs.db "
        "beside it) or a postgresql:// URL (both in that database; many nodes)",
    )
    artifacts_dir: str | None = Field(None, description="artifacts (default STORE/artifacts)")
    summarize: bool = Field(
        True,
        description="summaries and facts besides raw chunks; "
        "false: raw chunks only, the summarizer never runs",
    )
    apps: dict[str, AppIngestionSettings] = Field(default_factory=dict)

    def summarize_for(self, app_name: str) -> bool:
        """Whether ``app_name``'s sessions are summarized (its override, else the default)."""
        app = self.apps.get(app_name)
        return self.summarize if app is None or app.summarize is None else app.summarize

    @field_validator("sessions_db", "artifacts_dir")
    @classmethod
    def _expand(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None or (
            info.field_name == "sessions_db" and (v == ":memory:" or is_postgres_url(v))
        ):
            return v  # SQLite's in-memory database, a PostgreSQL URL: no file to make absolute
        supported = SESSIONS if info.field_name == "sessions_db" else ARTIFACTS
        # Checked before it is made absolute: a URL would become a path under the cwd.
        local = local_location(v, field=f"ingestion.{info.field_name}", supported=supported)
        return str(Path(local).expanduser().absolute())


class ModelSettings(StrictModel):
    """Embedders, the summarizer, their deployments, and query encoding."""

    embedder: str = Field(
        "default",
        min_length=1,
        description="embedder spec (mnemoray.embedders.EmbedderSpec): "
        "default, none, torch, onnx, a path or hub name, then "
        "',key=value' options (runtime, device, threads, spin); or "
        "an OpenAI-compatible server: 'openai,url=...,model=...'",
    )
    query_embedder: str = Field(
        "auto",
        min_length=1,
        description="spec of the in-process query embedder: 'auto' = the `embedder` "
        "spec (same model and runtime, opened for queries); else another spec of the "
        "same model",
    )
    query_threads: int | None = Field(
        None,
        ge=1,
        description="intra-op threads of the query embedder (default: 1 in a Serve "
        "replica, whose encoder thread runs beside its event loop; else the runtime's)",
    )
    batch_max_size: int = Field(16, ge=1, le=256, description="most queries per encoder batch")
    query_run_rows: int = Field(
        6,
        ge=1,
        le=256,
        description="most queries per encoder "
        "run inside a batch (length-sorted first, so a run "
        "pads less); ONNX Runtime only, other embedders take "
        "the whole batch",
    )
    embedder_deployment: bool = Field(
        True,
        description="bulk embedding of writes in a separate Embedder deployment (else in-process)",
    )
    embedder_replicas: int = Field(1, ge=1)
    summarizer: str = Field("extractive", min_length=1)
    summarizer_options: dict[str, Any] = Field(default_factory=dict)
    summarizer_deployment: bool = Field(
        True, description="session distillation's summarizer in a separate deployment"
    )
    summarizer_replicas: int = Field(1, ge=1)


WebhookEvent = Literal["on_memory_created", "on_memory_recalled", "on_memory_forgotten"]


def _every_webhook_event() -> list[WebhookEvent]:
    return ["on_memory_created", "on_memory_recalled", "on_memory_forgotten"]


class HookSettings(StrictModel):
    """Memory lifecycle events (mnemoray.memory.service.hooks) POSTed to a URL, off the request
    path; a failed POST is logged and counted, never an error of the request."""

    webhook_url: str | None = Field(None, description="http(s) URL; unset: no webhook")
    webhook_events: list[WebhookEvent] = Field(default_factory=_every_webhook_event)
    webhook_timeout_s: float = Field(5.0, gt=0, le=60)

    @field_validator("webhook_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        from mnemoray.memory.service.webhook import check_webhook_url

        return None if v is None else check_webhook_url(v)
