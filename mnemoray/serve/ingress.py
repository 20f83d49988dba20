"""The FastAPI ingress deployment: where a recall is answered, in one hop.

Hot path of ``POST /v1/recall`` (default ``index_mode: ingress``, ``ingress: direct``)::

    client -> MemoryIngress replica's own HTTP server         (no hop; replica_http)
                               |- auth + pydantic validation   (event loop)
                               |- has the user any memories?   (cached candidate set)
                               |- query vector: LRU hit, or the query encoder's
                               |    next batch, on its own thread (embedders.query_encoder)
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
import contextlib
import functools
import logging
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from ray import serve

from mnemoray.http.app import build_api, http_config
from mnemoray.http.auth import ApiKeys
from mnemoray.http.connection_guard import connection_limits
from mnemoray.http.memory import call_on_loop
from mnemoray.http.parts import IO_THREADS, build_parts, recall_hook
from mnemoray.memory.service import app_recall
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import shard_of
from mnemoray.profiles.domain import merged_index
from mnemoray.serve.deployments import remote_models
from mnemoray.serve.ingress_mode import (
    ingress_to_use,
    replica_deployment_config,
    serve_proxy_runs,
    shutdown_budget_s,
)
from mnemoray.serve.metrics_hub import attach_hub
from mnemoray.serve.replica_http import ReplicaHttp, bind, instance_id
from mnemoray.settings.serve import parse_settings

log = logging.getLogger("ray.serve")

# Seconds a replica whose construction failed gives its HTTP server to stop.
FAILED_START_STOP_S = 5.0


@serve.deployment(
    ray_actor_options={"num_cpus": 0.5}, max_ongoing_requests=128, health_check_period_s=10
)
@serve.ingress()
class MemoryIngress:
    async def __init__(  # type: ignore[misc]  # Serve awaits an async constructor
        self,
        settings: Mapping[str, Any],
        embedder_handle: Any = None,
        summarizer_handle: Any = None,
        index_handle: Any = None,
        *,
        ingress_chosen: bool = True,
    ) -> None:
        try:
            await self._construct(
                settings, embedder_handle, summarizer_handle, index_handle, ingress_chosen
            )
        except BaseException:
            # Serve never calls __del__ on a replica whose constructor failed: what was
            # started (the job worker, compaction, the reloader, the HTTP server) stops
            # here. The budget lets the HTTP server stop itself (it closes its socket);
            # cancelled at once, it could leave the port bound.
            with contextlib.suppress(Exception):  # the failure that got here is the news
                await self._shut_down(FAILED_START_STOP_S)
            raise

    async def _construct(
        self,
        settings: Mapping[str, Any],
        embedder_handle: Any,
        summarizer_handle: Any,
        index_handle: Any,
        ingress_chosen: bool,
    ) -> None:
        """The construction; each part it starts is stopped by :meth:`_shut_down`."""
        s = self.settings = parse_settings(settings)
        self.loop = asyncio.get_running_loop()  # the loop requests run on
        self.keys = ApiKeys.from_digests(s.server.api_key_digests)
        if self.keys.open:
            log.warning(
                "mnemoray: no API keys configured: the API is OPEN and answers "
                "127.0.0.1 clients only (bind server.host, or the HTTP proxy, to "
                "127.0.0.1)"
            )
        # Blocking I/O (SQLite, Parquet, artifacts, compile); never the query encoder.
        self.io_pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="mnemoray-io")
        write_embedder, summarizer = await remote_models(s, embedder_handle, summarizer_handle)
        # Store, service, query embedder, sessions, artifacts, compiler: built as the
        # local backend builds them (mnemoray.http.parts).
        parts = self.parts = build_parts(
            s, write_embedder, summarizer, sharded=index_handle is not None
        )
        parts.metrics.hub = attach_hub(parts.metrics.registry)
        store = parts.store
        self.shards = store.shards
        self.store_root = store.root
        # The query embedder lives here, in-process: no hop on the hot path.
        self.query_embedder = q = parts.query_embedder
        self.index = index_handle
        self.query_cache = parts.query_cache
        # The core service, with a watching reloader: requests never wait for a load.
        self.memory: MemoryService | None = parts.memory
        self.ops: MemoryOps | None = parts.ops
        self.sessions = parts.sessions
        self.artifacts = parts.artifacts
        self.compiler = parts.compiler
        self.metrics = parts.metrics
        parts.start_jobs(self.memory_op_sync)  # ingestion jobs, auto compaction
        assert parts.ingestion is not None  # start_jobs made it
        self.ingestion = parts.ingestion
        self.compaction = parts.compaction
        if self.query_embedder is not None:  # first encode pays lazy init; not a request
            self.query_embedder.encode(["warm up"])
        # ingress_chosen False (build_app: no layer set server.ingress): the default
        # direct yields to a Serve proxy that a Serve config started (ingress_mode).
        ingress: str = s.server.ingress
        if ingress == "direct" and not ingress_chosen:
            ingress = ingress_to_use(ingress, ingress_chosen, await serve_proxy_runs())
        self.http = await self._direct_ingress() if ingress == "direct" else None
        log.info(
            "mnemoray ingress ready: store %s (%s rows), query embedder %s (%s), "
            "index %s, ingress %s",
            s.store,
            self.store_stats().get("rows"),
            getattr(q, "model_id", None),
            type(q).__name__,
            s.server.index_mode,
            ingress,
        )

    async def _direct_ingress(self) -> ReplicaHttp:
        """This replica's own HTTP server on server.host:server.port (replica_http)."""
        import ray

        server = self.settings.server
        instance = instance_id(
            ray.get_runtime_context().gcs_address, serve.get_replica_context().app_name
        )
        # No proxy in front: the app sets X-Request-ID itself.
        api = build_api(self, http_config(server, self.keys, echo_request_id=True))
        # In a thread: probing a busy sibling may take a while (replica_http.bind).
        sock = await asyncio.to_thread(bind, server.host, server.port, instance=instance)
        return ReplicaHttp(
            api,
            server.host,
            server.port,
            instance=instance,
            loop=self.loop,
            sock=sock,
            limits=connection_limits(server),
        )

    def __serve_build_asgi_app__(self) -> Any:
        server = self.settings.server
        # Serve's proxy sets X-Request-ID itself.
        return build_api(self, http_config(server, self.keys, echo_request_id=False))

    async def __del__(self) -> None:
        # Serve awaits an async __del__ (and kills the replica once it returns). It
        # counts no direct-ingress request as ongoing, so this waits for them itself,
        # within what is left of the deployment's graceful_shutdown_timeout_s.
        await self._shut_down(shutdown_budget_s(replica_deployment_config()))

    async def _shut_down(self, http_timeout_s: float) -> None:
        """Stop what was started, whatever construction reached: the HTTP server (its
        open requests get ``http_timeout_s``), the pools' queued work, then every part
        (:meth:`ReplicaParts.stop`), even when a step before failed; the first error is
        raised at the end."""
        http, parts = getattr(self, "http", None), getattr(self, "parts", None)
        try:
            if http is not None:
                await http.stop(http_timeout_s)
        finally:
            pool = getattr(self, "io_pool", None)
            if pool is not None:  # not waited for: a thread still running keeps on
                pool.shutdown(wait=False, cancel_futures=True)
            if parts is not None:
                parts.stop()

    async def embed_query(self, text: str) -> np.ndarray:
        """The query's vector: the shared cache, else the batched query encoder."""
        return await self.parts.embed_query(text)

    # -- memory operations: in this replica, or on the shard's Index replica ------------
    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        if self.memory is None:
            shard = str(shard_of(app_name, user_id, self.shards))
            return await self.index.options(multiplexed_model_id=shard).call.remote(
                op, app_name, user_id, kwargs
            )
        assert self.ops is not None
        return await self.run_io(self.ops.call, op, app_name, user_id, kwargs)

    async def domain(self, app_name: str) -> dict[str, Any]:
        """An app's domain index. Sharded, every shard's replica gives its users' part
        and this one adds them up (mnemoray.profiles.domain)."""
        if self.memory is not None:
            return await self.memory_op("domain", app_name, "")
        parts = await asyncio.gather(
            *(
                self.index.options(multiplexed_model_id=str(shard)).call.remote(
                    "domain_part", app_name, "", {}
                )
                for shard in range(self.shards)
            )
        )
        return merged_index(app_name, parts).to_dict()

    async def recall_app(
        self,
        app_name: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
    ) -> dict[str, Any]:
        """Across an app's users. Sharded, no replica holds them all: every shard's
        replica proposes candidates, this one ranks them (mnemoray.memory.service.app_recall)."""
        request = self.parts.resolve(app_name, None, query, top_k, filters, mode)
        if self.memory is not None:
            return await self.memory_op("recall_app", app_name, "", request=request)
        # No replica here holds the app's rows: the scope is taken to have memories (its
        # shards answer that), the store to embed when this replica has a query model.
        vec = (
            await self.embed_query(query)
            if request.needs_vector(embeds=self.query_embedder is not None, has_memories=True)
            else None
        )
        proposals = await asyncio.gather(
            *(
                self.index.options(multiplexed_model_id=str(shard)).call.remote(
                    "app_candidates", app_name, "", {"request": request, "query_vec": vec}
                )
                for shard in range(self.shards)
            )
        )
        config = self.settings.retrieval_for(app_name)
        results = app_recall.rank(config, proposals, request, vec)
        return app_recall.answer(results, min(p.store_version for p in proposals))

    def memory_op_sync(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        """From a worker thread (compile's memory preload, ingestion triggers)."""
        if self.memory is None:
            shard = str(shard_of(app_name, user_id, self.shards))
            return call_on_loop(
                self.loop,
                lambda: self.index.options(multiplexed_model_id=shard).call.remote(
                    op, app_name, user_id, kwargs
                ),
                None,
            )
        assert self.ops is not None
        return self.ops.call(op, app_name, user_id, kwargs)

    async def run_io(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self.io_pool, functools.partial(fn, *args, **kwargs)
        )

    async def recall(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        explain: bool = False,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Recall as JSON: the core service ranks; this adds only the batched encoder."""
        request = self.parts.resolve(
            app_name, user_id, query, top_k, filters, mode, explain, budget_tokens
        )
        if self.memory is None:  # sharded: embed here, search on the shard's replica
            # The user's rows are on the shard's replica (asking it first is one more hop
            # than the encode costs): the scope is taken to have memories.
            vec = (
                await self.embed_query(query)
                if request.needs_vector(embeds=self.query_embedder is not None, has_memories=True)
                else None
            )
            return await self.memory_op("recall", app_name, user_id, request=request, query_vec=vec)
        return await self.parts.recall_here(self.run_io, request)

    def memory_search(self, loop: asyncio.AbstractEventLoop, agent_name: str | None = None) -> Any:
        """The compiler's ``memory_search`` hook (replica_parts.recall_hook): the query is
        embedded through the same query encoder."""
        return recall_hook(self.recall, loop, agent_name)

    # -- compile --------------------------------------------------------------------------
    async def compile(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        agent: Mapping[str, Any],
        new_message: str | None,
        temp_state: Mapping[str, Any] | None,
        callee: Mapping[str, Any] | None = None,
        memory_agent: str | None = None,
        at_event_id: str | None = None,
    ) -> dict[str, Any]:
        search = functools.partial(self.memory_search, asyncio.get_running_loop())
        return await self.run_io(
            self.parts.compile,
            app_name,
            user_id,
            session_id,
            agent,
            new_message,
            temp_state,
            callee,
            search,
            self.memory_op_sync,
            at_event_id,
            memory_agent,
        )

    # -- ingestion: durable jobs (serve.ingestion) ------------------------------------------
    def end_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        wait: bool = False,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        return self.ingestion.end_session(
            app_name, user_id, session_id, wait=wait, submitter=submitter
        )

    def enqueue_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        return self.ingestion.enqueue_session(app_name, user_id, session, submitter=submitter)

    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.ingestion.get_job(app_name, user_id, job_id)

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.ingestion.retry_job(app_name, user_id, job_id)

    # -- erasure (mnemoray.memory.hygiene.erasure) ---------------------------------------------
    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, actor: str = ""
    ) -> dict[str, Any]:
        return self.parts.delete_session(app_name, user_id, session_id, actor=actor)

    def forget_everything(
        self, app_name: str, user_id: str, *, reason: str = "", actor: str = ""
    ) -> dict[str, Any]:
        return self.parts.forget_everything(app_name, user_id, reason=reason, actor=actor)

    # -- the inspector's reads (mnemoray.http.inspector) --------------------------------
    def tenants(self, apps: Collection[str] | None = None) -> dict[str, Any]:
        return self.parts.tenants(apps)

    def store_report(self) -> dict[str, Any]:
        return self.parts.store_report()

    # -- stats ---------------------------------------------------------------------------
    def store_stats(self) -> dict[str, Any]:
        return self.parts.store_stats()
