"""The FastAPI ingress deployment: where a recall is answered, in one hop.

Hot path of ``POST /v1/recall`` (default ``index_mode: ingress``, ``ingress: direct``)::

    client -> MemoryIngress replica's own HTTP server         (no hop; replica_http)
                               |- auth + pydantic validation   (event loop)
                               |- has the user any memories?   (cached candidate set)
                               |- query vector: LRU hit, or @serve.batch micro-batch
                               |    -> embedder.encode on one dedicated thread
                               '- hybrid search over the memory-mapped snapshot
                                    (event loop; sub-millisecond for one user)

Nothing on that path crosses a process boundary (with ``ingress: proxy`` the Serve
proxy is one hop in front): the query is
embedded by the model loaded in this replica and searched in this replica's
snapshot (the core ``MemoryService``). The ``Embedder`` / ``Summarizer`` deployments only
serve writes; with ``index_mode: deployment`` the search moves to the ``Index``
deployment (one more hop, for stores that outgrow a replica).

Blocking work that is not on that path (SQLite, Parquet/FAISS writes, compile,
artifacts) runs in a thread pool so the event loop keeps answering recalls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from ray import serve

from mnemoray.artifact_files import FileArtifactStore
from mnemoray.compiler import AgentSpec, Callee, Compiler, MemorySnippet, Services
from mnemoray.embedders import EmbedderError, EmbedderSpec, check_model, open_embedder
from mnemoray.memory import app_recall
from mnemoray.memory.agent_names import memory_view
from mnemoray.memory.backend import open_backend
from mnemoray.memory.hygiene import attach_hygiene, close_service
from mnemoray.memory.job_guard import guard_jobs
from mnemoray.memory.json_ops import MemoryOps
from mnemoray.memory.layout import shard_of
from mnemoray.memory.manifest import read_manifest
from mnemoray.memory.query_cache import QueryVectorCache
from mnemoray.memory.reload import SnapshotReloader
from mnemoray.memory.retrieval import RecallFilters, check_mode
from mnemoray.memory.service import MemoryService
from mnemoray.profiles.domain import merged_index
from mnemoray.profiles.reads import profile_over
from mnemoray.serve.api import build_api, http_config
from mnemoray.serve.auth import ApiKeys
from mnemoray.serve.compaction import start_auto_compaction
from mnemoray.serve.deployments import remote_models
from mnemoray.serve.ingestion import IngestionJobs
from mnemoray.serve.ingress_mode import (
    ingress_to_use,
    replica_deployment_config,
    serve_proxy_runs,
    shutdown_budget_s,
)
from mnemoray.serve.memory import attach_webhook, call_on_loop
from mnemoray.serve.metrics import Metrics
from mnemoray.serve.replica_http import ReplicaHttp, bind, instance_id
from mnemoray.serve.settings import parse_settings
from mnemoray.sqlite_store import SQLiteSessionStore

log = logging.getLogger("ray.serve")

# Query micro-batching (``@serve.batch`` on ``embed_queries``): a batch costs less
# per query than single encodes, so batching pays under concurrency, while a fixed
# wait is pure latency for a lone client (figures: benchmarks/README.md, "Design
# measurements"). Serve forms the next batch while the
# previous one is still encoding (with max_concurrent_batches=1 it then waits), so a
# fixed window would cut the queue into many small batches. The wait therefore
# tracks the encoder (``_batch_wait``):
# - encoder idle, no other query in flight: 0 (a lone client never waits);
# - encoder idle, others in flight: BATCH_WAIT_S, about one single-query encode:
#   enough to gather a burst, small against the latency budget;
# - encoder busy: until it is expected to be free (EMA of batch encode time minus
#   the time it has run, at least BATCH_WAIT_S, at most MAX_BATCH_WAIT_S), so the
#   queries that arrive meanwhile leave together as one batch.
# BATCH_MAX_SIZE 16: past it the per-query cost barely falls while a batch's latency
# keeps growing (padding to the longest query). Settings: batch_max_size,
# batch_wait_timeout_s.
#
# Where a batch is encoded (``encode_in_loop``, default on): on the event loop. While
# it encodes, arriving requests queue in front of the loop and then join the next
# batch together: larger batches than on the encoder thread at the same throughput,
# i.e. less CPU per query on a saturated machine, and a lone query costs the same
# either way. The thread
# variant keeps the loop free for other routes while a batch encodes (shorter tails
# for non-recall requests on a machine with spare cores).
BATCH_MAX_SIZE = 16
BATCH_WAIT_S = 0.002
MAX_BATCH_WAIT_S = 0.05


@serve.deployment(ray_actor_options={"num_cpus": 0.5}, max_ongoing_requests=128,
                  health_check_period_s=10)
@serve.ingress()
class MemoryIngress:
    async def __init__(self, settings: Mapping[str, Any], embedder_handle: Any = None,
                       summarizer_handle: Any = None, index_handle: Any = None, *,
                       ingress_chosen: bool = True) -> None:
        s = self.settings = parse_settings(settings)
        self.loop = asyncio.get_running_loop()  # the loop requests run on
        self.keys = ApiKeys.from_digests(s.server.api_key_digests)
        if self.keys.open:
            log.warning("mnemoray: no API keys configured: the API is OPEN and answers "
                        "127.0.0.1 clients only (bind server.host, or the HTTP proxy, to "
                        "127.0.0.1)")
        # Blocking I/O (SQLite, Parquet, artifacts, compile); never the query encoder.
        self.io_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="mnemoray-io")
        # With encode_in_loop off: one thread for the query encoder (batches are serial,
        # torch/ORT use their own intra-op threads; the loop stays free meanwhile).
        self.encode_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemoray-enc")
        # A path, parquet://DIR or lancedb://DIR; index_mode sharded (an Index deployment
        # serving shards) needs a Parquet store: Unsupported names it otherwise.
        store = open_backend(s.store, s.shards,
                             load_shards=[] if index_handle is not None else None)
        self.shards = store.shards
        self.store_root = store.root
        # The query embedder lives here, in-process: no hop on the hot path.
        # "auto": the write spec; open_embedder gives it the same model and runtime.
        auto = s.models.query_embedder.strip().lower() == "auto"
        query_spec = EmbedderSpec.parse(
            s.models.embedder if auto else s.models.query_embedder,
            field="models.embedder" if auto else "models.query_embedder",
        ).override(threads=s.models.query_threads)
        self.query_embedder = open_embedder(query_spec, store, "query")
        write_embedder, summarizer = await remote_models(s, embedder_handle,
                                                         summarizer_handle)
        q, w = self.query_embedder, write_embedder
        if (q is None) != (w is None):
            raise EmbedderError(f"writes would embed with {getattr(w, 'model_id', None)!r} "
                                f"and queries with {getattr(q, 'model_id', None)!r}; they "
                                f"must be one model", field="models.query_embedder")
        if q is not None and w is not None:
            check_model(q, w.model_id, w.dim, where="the write embedder")
        self.index = index_handle
        self.query_cache = QueryVectorCache()
        # The core service, with a watching reloader: requests never wait for a load.
        self.memory: MemoryService | None = None
        self.ops: MemoryOps | None = None
        self._attached: tuple[Any, ...] = (None,)  # hygiene, webhook: stopped in __del__
        if index_handle is None:
            reloader = SnapshotReloader(store.load, store.root,
                                        watch_interval_s=s.server.reload_interval_s,
                                        stamp=store.stamp).start()
            self.memory = MemoryService(store, write_embedder, summarizer, s.recall.default,
                                        app_configs=s.recall.app_configs, reloader=reloader,
                                        query_cache=self.query_cache)
            webhook = attach_webhook(self.memory, s.hooks)
            self.memory.memory_prompt = s.compaction.memory_prompt_for
            self.memory.summarize_for = s.ingestion.summarize_for  # per app (raw chunks)
            self.memory.scopes = s.scopes.policy  # agent-only memories, cross-app sharing
            self._attached = (attach_hygiene(self.memory, s.hygiene), webhook)
            self.ops = MemoryOps(self.memory)
        self.sessions = SQLiteSessionStore(s.sessions_path)
        self.artifacts = FileArtifactStore(s.artifacts_path)
        self.compiler = Compiler.default()
        self.metrics = Metrics(self.store_stats)
        # Every ingestion (end, triggers, queued adds) is a durable job run by a worker
        # thread here; a restart resumes the unfinished ones.
        self.ingestion = IngestionJobs(s, self.sessions, self.memory_op_sync, self.metrics)
        if self.memory is not None:  # a forget cancels the owner's queued jobs first
            guard_jobs(self.memory, self.ingestion.queue)
        # Compaction after appends, in background threads (mnemoray.serve.compaction): the same
        # summarizer as ingestion, the write embedder for topic shifts.
        self.compaction = start_auto_compaction(
            s.compaction, self.sessions, summarizer, self.metrics,
            encode=None if write_embedder is None else write_embedder.encode)
        self._embedding = 0  # queries between "want a vector" and "got it"
        self._wait_now = -1.0
        self._encode_started: float | None = None  # the running batch's start
        self._encode_ema = 0.005  # seconds per batch, smoothed
        self.embed_queries.set_max_batch_size(s.models.batch_max_size)
        if self.query_embedder is not None:  # first encode pays lazy init; not a request
            self.query_embedder.encode(["warm up"])
        # ingress_chosen False (build_app: no layer set server.ingress): the default
        # direct yields to a Serve proxy that a Serve config started (ingress_mode).
        ingress = s.server.ingress
        if ingress == "direct" and not ingress_chosen:
            ingress = ingress_to_use(ingress, ingress_chosen, await serve_proxy_runs())
        self.http = await self._direct_ingress() if ingress == "direct" else None
        log.info("mnemoray ingress ready: store %s (%s rows), query embedder %s (%s), "
                 "index %s, ingress %s", s.store, self.store_stats().get("rows"),
                 getattr(q, "model_id", None), type(q).__name__, s.server.index_mode,
                 ingress)

    async def _direct_ingress(self) -> ReplicaHttp:
        """This replica's own HTTP server on server.host:server.port (replica_http)."""
        import ray

        server = self.settings.server
        instance = instance_id(ray.get_runtime_context().gcs_address,
                               serve.get_replica_context().app_name)
        # No proxy in front: the app sets X-Request-ID itself.
        api = build_api(self, http_config(server, self.keys, echo_request_id=True))
        # In a thread: probing a busy sibling may take a while (replica_http.bind).
        sock = await asyncio.to_thread(bind, server.host, server.port, instance=instance)
        return ReplicaHttp(api, server.host, server.port, instance=instance, loop=self.loop,
                           sock=sock)

    def __serve_build_asgi_app__(self) -> Any:
        server = self.settings.server
        # Serve's proxy sets X-Request-ID itself.
        return build_api(self, http_config(server, self.keys, echo_request_id=False))

    async def __del__(self) -> None:
        # Serve awaits an async __del__ (and kills the replica once it returns). It
        # counts no direct-ingress request as ongoing, so this waits for them itself,
        # within what is left of the deployment's graceful_shutdown_timeout_s.
        http = getattr(self, "http", None)
        if http is not None:
            await http.stop(shutdown_budget_s(replica_deployment_config()))
        memory = getattr(self, "memory", None)
        if memory is not None:
            hygiene, *rest = getattr(self, "_attached", (None,))
            close_service(memory, hygiene, *rest)
        ingestion = getattr(self, "ingestion", None)
        if ingestion is not None:
            ingestion.stop()
        compaction = getattr(self, "compaction", None)
        if compaction is not None:
            compaction.stop(timeout=1)

    # -- query embedding: in-process, micro-batched ----------------------------------
    @serve.batch(max_batch_size=BATCH_MAX_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)
    async def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        self.metrics.embed_batch.observe(len(texts))
        assert self.query_embedder is not None
        start = self._encode_started = time.perf_counter()
        try:
            if self.settings.models.encode_in_loop:
                vectors = self.query_embedder.encode(texts, len(texts))
            else:
                vectors = await asyncio.get_running_loop().run_in_executor(
                    self.encode_pool, self.query_embedder.encode, texts, len(texts))
        finally:
            self._encode_started = None
            self._encode_ema = 0.8 * self._encode_ema + 0.2 * (time.perf_counter() - start)
        return list(vectors)

    async def embed_query(self, text: str) -> np.ndarray:
        """The query's vector: the shared cache, else the micro-batched encoder."""
        vec = self.query_cache.get(text)
        if vec is not None:
            return vec
        self._embedding += 1
        try:
            wait = self._batch_wait()
            if wait != self._wait_now:
                self.embed_queries.set_batch_wait_timeout_s(wait)
                self._wait_now = wait
            vec = await self.embed_queries(text)
        finally:
            self._embedding -= 1
        return self.query_cache.put(text, vec)

    def _batch_wait(self) -> float:
        """How long the batch this query opens may wait for companions (see top)."""
        base = self.settings.models.batch_wait_timeout_s
        started = self._encode_started
        if started is not None:  # encoder busy: leave when it is expected to be free
            left = self._encode_ema - (time.perf_counter() - started)
            return round(min(MAX_BATCH_WAIT_S, max(base, left)), 4)
        return base if self._embedding > 1 else 0.0

    # -- memory operations: in this replica, or on the shard's Index replica ------------
    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        if self.memory is None:
            shard = str(shard_of(app_name, user_id, self.shards))
            return await self.index.options(multiplexed_model_id=shard).call.remote(
                op, app_name, user_id, kwargs)
        assert self.ops is not None
        return await self.run_io(self.ops.call, op, app_name, user_id, kwargs)

    async def domain(self, app_name: str) -> dict[str, Any]:
        """An app's domain index. Sharded, every shard's replica gives its users' part
        and this one adds them up (mnemoray.profiles.domain)."""
        if self.memory is not None:
            return await self.memory_op("domain", app_name, "")  # type: ignore[no-any-return]
        parts = await asyncio.gather(*(
            self.index.options(multiplexed_model_id=str(shard)).call.remote(
                "domain_part", app_name, "", {}) for shard in range(self.shards)))
        return merged_index(app_name, parts).to_dict()

    async def recall_app(self, app_name: str, query: str, top_k: int,
                         filters: Mapping[str, Any] | None, mode: str | None) -> dict[str, Any]:
        """Across an app's users. Sharded, no replica holds them all: every shard's
        replica proposes candidates, this one ranks them (mnemoray.memory.app_recall)."""
        kwargs = {"query": query, "top_k": top_k, "filters": filters, "mode": mode}
        if self.memory is not None:
            return await self.memory_op("recall_app", app_name, "", **kwargs)
        config = self.settings.retrieval_for(app_name)
        wanted = check_mode(mode or config.mode)
        vec = await self.embed_query(query) if self.query_embedder is not None \
            and wanted != "keyword" and isinstance(query, str) and query.strip() else None
        proposals = await asyncio.gather(*(
            self.index.options(multiplexed_model_id=str(shard)).call.remote(
                "app_candidates", app_name, "", {**kwargs, "query_vec": vec})
            for shard in range(self.shards)))
        results = app_recall.rank(config, proposals, app_name, query, vec, top_k, filters,
                                  wanted)
        return app_recall.answer(results, min(p.store_version for p in proposals))

    def memory_op_sync(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        """From a worker thread (compile's memory preload, ingestion triggers)."""
        if self.memory is None:
            shard = str(shard_of(app_name, user_id, self.shards))
            return call_on_loop(self.loop, lambda: self.index.options(
                multiplexed_model_id=shard).call.remote(op, app_name, user_id, kwargs), None)
        assert self.ops is not None
        return self.ops.call(op, app_name, user_id, kwargs)

    async def run_io(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self.io_pool, functools.partial(fn, *args, **kwargs))

    async def recall(self, app_name: str, user_id: str, query: str, top_k: int,
                     filters: Mapping[str, Any] | None, mode: str | None) -> dict[str, Any]:
        """Recall as JSON: the core service ranks; this adds only the batched encoder."""
        mode = check_mode(mode or self.settings.retrieval_for(app_name).mode)
        flt = RecallFilters.from_dict(filters)
        mem, ops = self.memory, self.ops
        if mem is None or ops is None:  # sharded: embed here, search on the shard's replica
            vec = await self.embed_query(query) if self.query_embedder is not None \
                and mode != "keyword" and query.strip() else None
            return await self.memory_op("recall", app_name, user_id, query=query,
                                        query_vec=vec, top_k=top_k, filters=flt, mode=mode)
        # One snapshot for the decision and the search: a reload in between could
        # otherwise make the search embed the query itself, on the event loop.
        snap = mem.snapshot()
        vec = None
        if self.query_embedder is not None and mem.needs_query_vector(app_name, user_id,
                                                                      query, mode, snap):
            vec = await self.embed_query(query)
        if self.settings.server.offload_search:
            return await self.run_io(ops.op_recall, app_name, user_id, query, vec, top_k,
                                     flt, mode, snap)
        return ops.op_recall(app_name, user_id, query, vec, top_k, flt, mode, snap)

    def memory_search(self, loop: asyncio.AbstractEventLoop,
                      agent_name: str | None = None) -> Any:
        """The compiler's ``memory_search`` hook, run in a worker thread: the query is
        embedded through the same micro-batcher (on the event loop). ``agent_name``: the
        compiled agent, which also sees its own agent-only memories."""
        flt = {"agent_name": agent_name} if agent_name else None

        def search(app_name: str, user_id: str, query: str, top_k: int) -> list[MemorySnippet]:
            out = asyncio.run_coroutine_threadsafe(
                self.recall(app_name, user_id, query, top_k, flt, None), loop).result()
            return [MemorySnippet.from_recalled(m) for m in out["memories"]]
        return search

    # -- compile --------------------------------------------------------------------------
    async def compile(self, app_name: str, user_id: str, session_id: str,
                      agent: Mapping[str, Any], new_message: str | None,
                      temp_state: Mapping[str, Any] | None,
                      callee: Mapping[str, Any] | None = None,
                      memory_agent: str | None = None) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        spec, call = AgentSpec(**agent), Callee.from_dict(callee) if callee else None
        view = memory_view(spec.name, memory_agent)
        services = Services(memory_search=self.memory_search(loop, view),
                            artifacts=self.artifacts,
                            user_profile=profile_over(self.memory_op_sync))

        def work() -> dict[str, Any]:
            session = self.sessions.get_session(app_name, user_id, session_id)
            return self.compiler.compile(session, spec, new_message, services,
                                         dict(temp_state) if temp_state else None,
                                         call).to_dict()

        return await self.run_io(work)

    # -- ingestion: durable jobs (serve.ingestion) ------------------------------------------
    def end_session(self, app_name: str, user_id: str, session_id: str, *,
                    wait: bool = False) -> dict[str, Any]:
        return self.ingestion.end_session(app_name, user_id, session_id, wait=wait)

    def enqueue_session(self, app_name: str, user_id: str,
                        session: Mapping[str, Any]) -> dict[str, Any]:
        return self.ingestion.enqueue_session(app_name, user_id, session)

    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.ingestion.get_job(app_name, user_id, job_id)

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.ingestion.retry_job(app_name, user_id, job_id)

    # -- stats ---------------------------------------------------------------------------
    def store_stats(self) -> dict[str, Any]:
        if self.memory is not None:
            return self.memory.stats()
        m = read_manifest(self.store_root)
        return {} if m is None else {"version": m.version, "rows": m.rows,
                                     "tombstones": m.tombstone_count}
