"""Prometheus metrics of one ingress replica, and the ASGI middleware that feeds them.

One registry per replica. Inside Ray Serve, ``/metrics`` answers for the whole app:
each replica pushes its registry to the app's metrics hub and the scrape merges them
(counters and histograms summed, gauges labelled ``replica``: ``mnemoray.serve.metrics_hub``,
``mnemoray.serve.metrics_merge``). Outside Serve it answers this process's registry. Route
labels are route *templates* (``/v1/sessions/{session_id}``), never raw paths or
tenant names, so cardinality stays fixed and no tenant leaks into the metrics.

The middleware is plain ASGI (no BaseHTTPMiddleware: that costs a task and a
stream per request) and also enforces the body size limit: a declared
``Content-Length`` over the limit is refused before the body is read, and a
chunked body is counted as it streams; either way the answer is 413.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.exceptions import HTTPException

from mnemoray.errors import MnemorayError
from mnemoray.http.errors import error_body, scope_request_id

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.0125,
    0.015,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
RATIO_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TOKEN_BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)


class _StoreCollector:
    """Index size and reload counters, read from the ingress at scrape time."""

    def __init__(self, stats: Callable[[], dict[str, Any]]) -> None:
        self._stats = stats

    def collect(self) -> Iterable[Any]:
        readable = GaugeMetricFamily(
            "mnemoray_store_readable",
            "1 if the memory store's "
            "manifest could be read at this scrape, else 0 (run "
            "`mnemoray doctor`)",
        )
        try:
            s = self._stats()
        except MnemorayError:  # a damaged store: the scrape must still answer, and say so
            readable.add_metric([], 0.0)
            yield readable
            return
        readable.add_metric([], 1.0)
        yield readable
        for name, doc, key in (
            ("mnemoray_index_rows", "Memory rows committed in the store (incl. forgotten)", "rows"),
            ("mnemoray_index_tombstones", "Forget records in the store", "tombstones"),
            ("mnemoray_index_segments", "Segments loaded by this replica", "segments"),
            ("mnemoray_index_version", "Manifest version this replica serves", "version"),
            ("mnemoray_index_last_load_ms", "Duration of the last snapshot load", "last_load_ms"),
            (
                "mnemoray_index_damaged_shards",
                "Shards whose files could not be loaded "
                "(their tenants get errors; run `mnemoray doctor`)",
                "damaged_shards",
            ),
        ):
            if s.get(key) is not None:
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], float(s[key]))
                yield g
        for name, doc, key in (
            ("mnemoray_index_reloads", "Snapshot swaps after a manifest change", "reloads"),
            ("mnemoray_index_reload_failures", "Snapshot loads that failed", "reload_failures"),
            (
                "mnemoray_memory_hook_errors",
                "Memory lifecycle hook calls that raised (logged, never an error of the request)",
                "hook_errors",
            ),
            (
                "mnemoray_memory_hook_events_dropped",
                "Memory lifecycle events dropped: the hook queue was full",
                "hook_events_dropped",
            ),
            (
                "mnemoray_memory_webhook_errors",
                "Memory lifecycle webhook POSTs that failed",
                "webhook_errors",
            ),
            (
                "mnemoray_memory_webhook_delivered",
                "Memory lifecycle webhook POSTs that succeeded",
                "webhook_delivered",
            ),
            (
                "mnemoray_memories_evicted",
                "Memories forgotten by per-user limits (reason evicted:<policy>)",
                "memories_evicted",
            ),
            (
                "mnemoray_consolidated_summaries_cascaded",
                "Consolidated summaries forgotten with a memory they merged",
                "summaries_cascaded",
            ),
        ):
            if s.get(key) is not None:
                c = CounterMetricFamily(name, doc)
                c.add_metric([], float(s[key]))
                yield c


class MergedMetrics(Protocol):
    """The app-wide exposition a Serve replica attaches (``mnemoray.serve.metrics_hub``)."""

    async def render(self) -> bytes: ...


class Metrics:
    def __init__(self, store_stats: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "mnemoray_http_requests",
            "HTTP requests",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "mnemoray_http_request_duration_seconds",
            "HTTP request latency inside the ingress replica",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.embed_batch = Histogram(
            "mnemoray_query_embed_batch_size",
            "Queries per in-replica embedding batch",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.ingestions = Counter(
            "mnemoray_session_ingestions", "Session ingestions", ["status"], registry=self.registry
        )
        # The ingestion queue (mnemoray.http.ingestion) sets the depth's function: read at scrape.
        self.queue_depth = Gauge(
            "mnemoray_ingestion_queue_depth",
            "Ingestion jobs queued or running (the shared jobs.db)",
            registry=self.registry,
        )
        self.job_latency = Histogram(
            "mnemoray_ingestion_job_duration_seconds",
            "Ingestion job latency, from enqueue to done or failed",
            ["status"],
            buckets=JOB_BUCKETS,
            registry=self.registry,
        )
        # Labels: a processor name and an error class name, both bounded by the code.
        self.compile_degraded = Counter(
            "mnemoray_compile_degraded",
            "Compiles that skipped a step whose outside source failed (answered without it)",
            ["step", "error"],
            registry=self.registry,
        )
        # Automatic compaction (mnemoray.compaction.auto): label = the trigger that fired.
        self.compactions = Counter(
            "mnemoray_compactions",
            "Compaction events written by the automatic compactor",
            ["trigger"],
            registry=self.registry,
        )
        self.compaction_latency = Histogram(
            "mnemoray_compaction_duration_seconds",
            "Compaction latency: summarizing to durable event",
            buckets=JOB_BUCKETS,
            registry=self.registry,
        )
        self.compaction_ratio = Histogram(
            "mnemoray_compaction_compression_ratio",
            "Raw tokens covered per summary token",
            buckets=RATIO_BUCKETS,
            registry=self.registry,
        )
        self.compaction_errors = Counter(
            "mnemoray_compaction_errors",
            "Automatic compactions that failed (nothing written)",
            ["error"],
            registry=self.registry,
        )
        # Compiled context (mnemoray.compiler): its size, and whether the static prefix
        # equals the previous compile's of the agent in the session (prefix-cache proxy).
        self.context_tokens = Histogram(
            "mnemoray_compile_context_tokens",
            "Tokens of each compiled request",
            buckets=TOKEN_BUCKETS,
            registry=self.registry,
        )
        self.prefix_checks = Counter(
            "mnemoray_compile_prefix_checks",
            "Compiles compared with the previous compile of the same agent and session",
            registry=self.registry,
        )
        self.prefix_reused = Counter(
            "mnemoray_compile_prefix_reused",
            "Compared compiles whose static-prefix hash was unchanged",
            registry=self.registry,
        )
        reuse_rate = Gauge(
            "mnemoray_compile_prefix_reuse_rate",
            "prefix_reused / prefix_checks since start (0 before any check)",
            registry=self.registry,
        )
        self._prefix_seen = [0, 0]  # checks, reused: the counters' values, for the rate
        reuse_rate.set_function(lambda: self._prefix_seen[1] / max(1, self._prefix_seen[0]))
        self.registry.register(_StoreCollector(store_stats))
        # Set by a Serve replica (mnemoray.serve.metrics_hub.attach_hub); None elsewhere.
        self.hub: MergedMetrics | None = None

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)

    def count_degraded(self, degraded: Iterable[Mapping[str, Any]]) -> None:
        """Count a compile's ``degraded`` steps (``{"step", "error", ...}`` each)."""
        for d in degraded:
            self.compile_degraded.labels(d["step"], d["error"]).inc()

    def observe_compile(self, out: Mapping[str, Any]) -> None:
        """A compiled request's dict: its size and its static-prefix reuse."""
        self.context_tokens.observe(out.get("total_tokens") or 0)
        step = next((t for t in out.get("trace") or () if t["name"] == "static_instruction"), None)
        reuse = (step or {}).get("detail", {}).get("prefix_reuse")
        if reuse is not None:
            self.prefix_checks.inc()
            self._prefix_seen[0] += 1
            if reuse["reused"]:
                self.prefix_reused.inc()
                self._prefix_seen[1] += 1

    def count_compaction(self, trigger: str, seconds: float, ratio: float) -> None:
        self.compactions.labels(trigger).inc()
        self.compaction_latency.observe(seconds)
        self.compaction_ratio.observe(ratio)

    def render(self) -> bytes:
        """This replica's registry alone."""
        return generate_latest(self.registry)

    async def exposition(self) -> bytes:
        """What ``/metrics`` answers: the app's merged metrics under Serve, else ours."""
        return await self.hub.render() if self.hub is not None else self.render()


def _error_body(status: int, message: str, request_id: str | None) -> bytes:
    return json.dumps(error_body(status, message, None, request_id)).encode()


class ServeMiddleware:
    """Body size limit (413) and per-route request metrics, as plain ASGI."""

    def __init__(self, app: Any, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body = max_body_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]
        try:
            try:
                declared = _content_length(scope)
            except ValueError as exc:
                status[0] = 400
                await _reply(send, scope, 400, str(exc))
                return
            if declared is not None and declared > self.max_body:
                status[0] = 413
                await _reply(
                    send,
                    scope,
                    413,
                    f"body: {declared} bytes is over the limit of {self.max_body} bytes",
                )
                return
            seen = [0]
            limit = self.max_body

            async def counted_receive() -> dict:
                message = await receive()
                if message["type"] == "http.request":
                    seen[0] += len(message.get("body", b""))
                    if seen[0] > limit:
                        raise HTTPException(413, f"body: over the limit of {limit} bytes")
                return message

            async def tracked_send(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            await self.app(scope, counted_receive, tracked_send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(
                path, scope.get("method", ""), status[0], time.perf_counter() - start
            )


def _content_length(scope: dict) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                n = int(value)
            except ValueError:
                raise ValueError("content-length: not an integer") from None
            if n < 0:
                raise ValueError("content-length: negative")
            return n
    return None


async def _reply(send: Callable, scope: dict, status: int, message: str) -> None:
    # The request id, when mnemoray.http.errors' middleware runs outside this one.
    body = _error_body(status, message, scope_request_id(scope))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
