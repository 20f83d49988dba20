"""What one API server is built of, whether Ray Serve runs it or not: the memory store
and service, the query embedder, sessions, artifacts, the compiler, the durable
ingestion jobs and automatic compaction, built from the settings in one place.

The Serve ingress (:mod:`mnemoray.serve.ingress`) and the Ray-free local backend
(:mod:`mnemoray.http.local_backend`, behind ``mnemoray ui``) both build their parts
here, so the two cannot drift apart; both embed queries through one
:class:`~mnemoray.embedders.query_encoder.QueryEncoder`, and they differ only in where
shards live.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnemoray.artifacts.files import FileArtifactStore
from mnemoray.compaction.auto import AutoCompactor
from mnemoray.compiler import AgentSpec, Callee, Compiler, MemorySnippet, Services
from mnemoray.compiler.replay import replay
from mnemoray.compiler.services import MemorySearch
from mnemoray.embedders import Embedder
from mnemoray.embedders.query_encoder import QueryEncoder
from mnemoray.errors import Unsupported
from mnemoray.http import inspector
from mnemoray.http.compaction import start_auto_compaction
from mnemoray.http.ingestion import IngestionJobs
from mnemoray.http.memory import attach_webhook
from mnemoray.http.metrics import Metrics
from mnemoray.http.models import open_query_embedder
from mnemoray.memory.hygiene.attach import attach_hygiene, close_service
from mnemoray.memory.hygiene.erasure import Erasure
from mnemoray.memory.ingest.guard import guard_jobs
from mnemoray.memory.recall.query_cache import QueryVectorCache
from mnemoray.memory.recall.request import RecallRequest, resolve_recall
from mnemoray.memory.records.agent_names import memory_view
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.manifest import read_manifest
from mnemoray.memory.store.ops.background_merge import BackgroundMerge
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.protocol import MemoryBackend, open_backend
from mnemoray.memory.store.reload import SnapshotReloader
from mnemoray.profiles.reads import profile_over
from mnemoray.sessions.backends import open_session_store
from mnemoray.sessions.store import SessionStore
from mnemoray.settings.serve import ServeSettings
from mnemoray.summarizers.base import Summarizer

#: Threads for a server's blocking work (SQLite, Parquet, artifacts, compile). Enough that
#: the writes waiting for a commit can queue behind it and share the next
#: (:mod:`mnemoray.memory.service.group_commit`); the waiting ones use no CPU.
IO_THREADS = 16

MemoryOpSync = Callable[..., Any]
RunIo = Callable[..., Awaitable[Any]]


@dataclass
class ReplicaParts:
    """The parts of one server. ``memory`` / ``ops`` are None when an ``Index``
    deployment serves the shards (``index_mode: sharded``)."""

    settings: ServeSettings
    store: MemoryBackend
    query_embedder: Embedder | None
    summarizer: Summarizer
    write_embedder: Embedder | None
    query_cache: QueryVectorCache
    memory: MemoryService | None
    ops: MemoryOps | None
    sessions: SessionStore
    artifacts: FileArtifactStore
    compiler: Compiler
    attached: tuple[Any, ...] = (None,)  # hygiene, webhook: stopped with the service
    metrics: Metrics = field(init=False)
    query_encoder: QueryEncoder | None = field(init=False)
    ingestion: IngestionJobs | None = None
    compaction: AutoCompactor | None = None
    memory_op_sync: MemoryOpSync | None = None

    def __post_init__(self) -> None:
        self.metrics = Metrics(self.store_stats)
        q, models = self.query_embedder, self.settings.models
        self.query_encoder = (
            None
            if q is None
            else QueryEncoder(
                q,
                max_batch=models.batch_max_size,
                run_rows=models.query_run_rows,
                on_batch=self.metrics.embed_batch.observe,
            )
        )

    # -- lifecycle -------------------------------------------------------------------
    def start_jobs(self, memory_op_sync: MemoryOpSync) -> None:
        """Start the background work once the owner can answer ``memory_op_sync``: a
        restart resumes unfinished ingestion jobs at once."""
        s = self.settings
        self.memory_op_sync = memory_op_sync  # the erasures' memory forgets go through it
        # Every ingestion (end, triggers, queued adds) is a durable job run by a worker
        # thread here; a restart resumes the unfinished ones.
        self.ingestion = IngestionJobs(s, self.sessions, memory_op_sync, self.metrics)
        if self.memory is not None:  # a forget cancels the owner's queued jobs first
            guard_jobs(self.memory, self.ingestion.queue)
        # Compaction after appends, in background threads (mnemoray.http.compaction): the
        # same summarizer as ingestion, the write embedder for topic shifts.
        w = self.write_embedder
        self.compaction = start_auto_compaction(
            s.compaction,
            self.sessions,
            self.summarizer,
            self.metrics,
            encode=None if w is None else w.encode,
        )

    def stop(self) -> None:
        """Stop every part, in order: the query encoder, the service (its hygiene,
        webhook and reloader), the ingestion worker, compaction, then the connections
        they wrote through (the job queue, the session store). Each step runs even when
        one before it failed (a thread left running outlives its owner); the first error
        is raised at the end."""
        steps: list[Callable[[], object]] = []
        memory, ingestion, compaction = self.memory, self.ingestion, self.compaction
        if self.query_encoder is not None:
            steps.append(functools.partial(self.query_encoder.close, timeout=5))
        if memory is not None:
            steps.append(functools.partial(close_service, memory, *self.attached))
        if ingestion is not None:
            steps.append(ingestion.stop)
        if compaction is not None:
            steps.append(functools.partial(compaction.stop, timeout=1))
        if ingestion is not None:
            steps.append(ingestion.queue.close)
        steps.append(self.sessions.close)
        run_all(steps)

    # -- reads -----------------------------------------------------------------------
    def store_stats(self) -> dict[str, Any]:
        if self.memory is not None:
            return self.memory.stats()
        m = read_manifest(self.store.root)
        return (
            {}
            if m is None
            else {"version": m.version, "rows": m.rows, "tombstones": m.tombstone_count}
        )

    def _whole_store(self, what: str) -> MemoryService:
        if self.memory is None:
            raise Unsupported(
                f"{what} reads every shard; with index_mode sharded no replica "
                f"holds them all: use `mnemoray stats` / `mnemoray doctor` on "
                f"the store",
                field="server.index_mode",
            )
        return self.memory

    def tenants(self, apps: Collection[str] | None = None) -> dict[str, Any]:
        """``GET /v1/apps`` (blocking; :func:`mnemoray.http.inspector.tenants`)."""
        return inspector.tenants(self._whole_store("listing apps").snapshot(), self.sessions, apps)

    def store_report(self) -> dict[str, Any]:
        """``GET /v1/store`` (blocking; :func:`mnemoray.http.inspector.store_report`)."""
        return inspector.store_report(self._whole_store("the store report").store)

    # -- erasure -----------------------------------------------------------------------
    def erasure(self) -> Erasure:
        """Deletes over this server's sessions, artifacts, job queue and memory
        operations (:mod:`mnemoray.memory.hygiene.erasure`); after :meth:`start_jobs`."""
        op, ingestion = self.memory_op_sync, self.ingestion
        assert op is not None, "start_jobs first"
        return Erasure(
            self.sessions, self.artifacts, None if ingestion is None else ingestion.queue, op
        )

    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, actor: str = ""
    ) -> dict[str, Any]:
        """``DELETE /v1/sessions/{id}`` (blocking; :meth:`Erasure.delete_session`)."""
        return self.erasure().delete_session(app_name, user_id, session_id, actor=actor)

    def forget_everything(
        self, app_name: str, user_id: str, *, reason: str = "", actor: str = ""
    ) -> dict[str, Any]:
        """``DELETE /v1/users/{app}/{user}`` (blocking; :meth:`Erasure.forget_user`)."""
        return self.erasure().forget_user(app_name, user_id, reason=reason, actor=actor)

    # -- recall and compile --------------------------------------------------------
    def resolve(
        self,
        app_name: str,
        user_id: str | None,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        explain: bool = False,
        budget_tokens: int | None = None,
    ) -> RecallRequest:
        """The checked request of one recall that came in over the API (``user_id``
        None: app-wide), its mode defaulted from the app's ``recall`` settings: what
        the service of any shard would resolve it to."""
        return resolve_recall(
            self.settings.retrieval_for(app_name),
            app_name,
            user_id,
            query,
            top_k,
            mode,
            filters,
            explain=explain,
            budget_tokens=budget_tokens,
        )

    async def embed_query(self, text: str) -> np.ndarray:
        """The query's vector: the shared cache, else the batched query encoder."""
        vec = self.query_cache.get(text)
        if vec is not None:
            return vec
        assert self.query_encoder is not None  # asked only where queries are embedded
        return self.query_cache.put(text, await self.query_encoder.encode(text))

    async def recall_here(self, run_io: RunIo, request: RecallRequest) -> dict[str, Any]:
        """Recall over the in-process service: the core service ranks; the query is
        embedded when the search needs a vector."""
        mem, ops = self.memory, self.ops
        assert mem is not None and ops is not None
        # One snapshot for the decision and the search: a reload in between could
        # otherwise make the search embed the query itself, on the event loop.
        snap = mem.snapshot()
        vec = None
        if self.query_embedder is not None and mem.needs_vector(request, snap):
            vec = await self.embed_query(request.query)
        if self.settings.server.offload_search:
            return await run_io(ops.recall, request, vec, snap)
        return ops.recall(request, vec, snap)

    def compile(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        agent: Mapping[str, Any],
        new_message: str | None,
        temp_state: Mapping[str, Any] | None,
        callee: Mapping[str, Any] | None,
        memory_search: Callable[[str | None], MemorySearch],
        memory_op_sync: MemoryOpSync,
        at_event_id: str | None = None,
        memory_agent: str | None = None,
    ) -> dict[str, Any]:
        """The CompiledRequest dict (blocking). ``memory_search(view)``: the compiler's
        recall hook for that memory view; ``at_event_id``: the session as it was right
        after that event, its artifacts as they were then
        (:func:`mnemoray.compiler.replay.replay`)."""
        spec, call = AgentSpec(**agent), Callee.from_dict(callee) if callee else None
        services = Services(
            memory_search=memory_search(memory_view(spec.name, memory_agent)),
            artifacts=self.artifacts,
            user_profile=profile_over(memory_op_sync),
        )
        session = self.sessions.get_session(app_name, user_id, session_id)
        if at_event_id is not None:
            session, services = replay(self.sessions, session, at_event_id, services)
        return self.compiler.compile(
            session, spec, new_message, services, dict(temp_state) if temp_state else None, call
        ).to_dict()


def run_all(steps: Iterable[Callable[[], object]]) -> None:
    """Call every step, even after one raised; then raise the first error."""
    error: BaseException | None = None
    for step in steps:
        try:
            step()
        except Exception as exc:  # the rest still run
            error = error or exc
    if error is not None:
        raise error


def open_service(
    s: ServeSettings,
    store: MemoryBackend,
    write_embedder: Embedder | None,
    summarizer: Summarizer,
    query_cache: QueryVectorCache | None = None,
) -> tuple[MemoryService, tuple[Any, ...]]:
    """The memory service of one server, or of one shard of an ``Index`` deployment, over
    ``store`` (the one place it is wired): a watching reloader (requests never wait for a
    load), the settings' per-app prompts, summarize policy and scopes, the webhook and
    hygiene. Returns ``(service, (hygiene, webhook))``, stopped by ``close_service(service,
    hygiene, webhook)``. A step that fails stops what the steps before it started."""
    reloader = SnapshotReloader(
        store.load, store.root, watch_interval_s=s.server.reload_interval_s, stamp=store.stamp
    ).start()
    service: MemoryService | None = None
    webhook: Any = None
    try:
        service = MemoryService(
            store,
            write_embedder,
            summarizer,
            s.recall.default,
            app_configs=s.recall.app_configs,
            reloader=reloader,
            query_cache=query_cache,
        )
        service.memory_prompt = s.compaction.memory_prompt_for  # per-app prompts
        service.summarize_for = s.ingestion.summarize_for  # per app (raw chunks)
        service.scopes = s.scopes.policy  # agent-only memories, cross-app sharing
        # A store of some shards only (an Index deployment's) never merges the whole one.
        if (
            isinstance(store, MemoryStore)
            and store.load_shards is None
            and s.writes.merge_after_segments
        ):
            service.merge = BackgroundMerge(
                store,
                after_segments=s.writes.merge_after_segments,
                small_rows=s.writes.small_segment_rows,
            )
        webhook = attach_webhook(service, s.hooks)
        return service, (attach_hygiene(service, s.hygiene), webhook)  # limits, usage
    except BaseException:
        with contextlib.suppress(Exception):  # the failure that got here is the news
            if service is None:
                reloader.stop()
            else:
                close_service(service, None, webhook)  # the reloader with the service
        raise


def recall_hook(
    recall: Callable[..., Coroutine[Any, Any, dict[str, Any]]],
    loop: asyncio.AbstractEventLoop,
    agent_name: str | None = None,
) -> MemorySearch:
    """The compiler's ``memory_search`` hook over a server's ``recall`` coroutine, called
    from a worker thread: the query is embedded and searched as a request's would be, on
    the event loop ``loop``. ``agent_name``: the compiled agent, which also sees its own
    agent-only memories."""
    flt = {"agent_name": agent_name} if agent_name else None

    def search(
        app_name: str, user_id: str, query: str, top_k: int, /, **budget: int
    ) -> list[MemorySnippet]:
        out = asyncio.run_coroutine_threadsafe(
            recall(app_name, user_id, query, top_k, flt, None, **budget), loop
        ).result()
        return [MemorySnippet.from_recalled(m) for m in out["memories"]]

    return search


def build_parts(
    s: ServeSettings,
    write_embedder: Embedder | None,
    summarizer: Summarizer,
    *,
    sharded: bool = False,
    share_write: bool = False,
) -> ReplicaParts:
    """Every part but the background jobs (:meth:`ReplicaParts.start_jobs`). ``sharded``:
    an ``Index`` deployment serves the shards, this server loads none. ``share_write``:
    queries may be embedded by ``write_embedder`` (:func:`open_query_embedder`)."""
    # A path, parquet://DIR or lancedb://DIR; index_mode sharded (an Index deployment
    # serving shards) needs a Parquet store: Unsupported names it otherwise.
    store = open_backend(s.store, s.shards, load_shards=[] if sharded else None)
    query_embedder = open_query_embedder(s, store, write_embedder, share_write=share_write)
    query_cache = QueryVectorCache()
    memory: MemoryService | None = None
    attached: tuple[Any, ...] = (None,)
    if not sharded:
        memory, attached = open_service(s, store, write_embedder, summarizer, query_cache)
    sessions: SessionStore | None = None
    try:
        sessions = open_session_store(s.sessions_path)
        return ReplicaParts(
            s,
            store,
            query_embedder,
            summarizer,
            write_embedder,
            query_cache,
            memory,
            None if memory is None else MemoryOps(memory),
            sessions,
            FileArtifactStore(s.artifacts_path),
            Compiler.default(),
            attached,
        )
    except BaseException:  # nothing started here may outlive the failure
        with contextlib.suppress(Exception):
            run_all(
                [
                    *([sessions.close] if sessions is not None else []),
                    *(
                        [functools.partial(close_service, memory, *attached)]
                        if memory is not None
                        else []
                    ),
                ]
            )
        raise


__all__ = ["IO_THREADS", "ReplicaParts", "build_parts", "recall_hook", "open_service", "run_all"]
