"""MemoryService: sessions in, hybrid recall out, over one memory store.

    service = MemoryService.open("STORE")          # MiniLM + extractive summarizer
    service.add_session(session)                   # distill, embed, commit (+ ledger)
    service.search("app", "user", "that flying animal we talked about")
    Services(memory_search=service.memory_search())   # the compiler's recall hook

Writes commit through the store's manifest; every call checks the manifest
(one ``stat``) and reloads the snapshot when it changed, so a write from this
or any other process is visible to the next search. User-scoped search reads
only that user's slice of that user's shard: tenant isolation is structural.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mnemoray.compiler.degrade import degradable
from mnemoray.compiler.services import MemorySearch, MemorySnippet, ProfileSource
from mnemoray.compiler.tools import budget_error, limit_error, unavailable_result
from mnemoray.embedders import (
    CoalescedEncoder,
    Embedder,
    EmbedderSpec,
    check_model,
    open_embedder,
    write_model,
)
from mnemoray.errors import ConfigError, InvalidInput, StoreError
from mnemoray.graph import UserGraph
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.query_cache import QueryVectorCache
from mnemoray.memory.recall.request import RecallRequest, resolve_recall
from mnemoray.memory.recall.result import RecallResult
from mnemoray.memory.recall.retriever import Retriever
from mnemoray.memory.records.filters import RecallFilters, event_span
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service import forget_query
from mnemoray.memory.service.graph_reads import DEFAULT_LIMIT, GraphAnswer, GraphReads
from mnemoray.memory.service.group_commit import GroupCommit
from mnemoray.memory.service.hooks import Hook, MemoryEvent, MemoryHooks, emit_memories
from mnemoray.memory.service.lifecycle import MemoryLifecycle
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.ops.background_merge import BackgroundMerge
from mnemoray.memory.store.protocol import MemoryBackend, open_backend
from mnemoray.memory.store.reload import SnapshotReloader
from mnemoray.memory.store.scopes import (
    NO_SHARING,
    ScopePolicy,
    check_readable,
    session_agent,
    stamp_agent,
)
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.supersede import (
    is_older_copy,
    session_version,
    stamp_version,
    stored_session_rows,
    superseded_ids,
)
from mnemoray.memory.store.writes import WriteResult, session_content_hash
from mnemoray.profiles.domain import DomainIndex, DomainPart
from mnemoray.profiles.profile import UserProfile
from mnemoray.profiles.reads import ProfileReads
from mnemoray.sessions.session import Session
from mnemoray.summarizers import Summarizer, get_summarizer

log = logging.getLogger(__name__)
SUPERSEDED = "superseded by a newer copy of its session"


# -- shared steps (the backfill uses them too) -------------------------------------
#: Characters of text an online write hands the embedder per call. A tokenizer's working
#: memory grows with the text of one call and the process keeps it afterwards, so a
#: large add is embedded in groups of about this much (at least one text each).
EMBED_GROUP_CHARS = 1 << 18


def text_groups(texts: Sequence[str], max_chars: int | None) -> list[list[int]]:
    """Indexes of ``texts`` in consecutive groups of at most ``max_chars`` characters
    (a longer text alone); None: one group."""
    if max_chars is None:
        return [list(range(len(texts)))] if texts else []
    groups: list[list[int]] = []
    size = 0
    for i, text in enumerate(texts):
        if not groups or size + len(text) > max_chars:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(text)
    return groups


def embed_memories(
    memories: Sequence[Memory],
    embedder: Embedder | None,
    batch_size: int | None = None,
    group_chars: int | None = None,
    shared: CoalescedEncoder | None = None,
) -> list[Memory]:
    """Memories with their ``key_text`` embedded (unchanged if no embedder): one encode
    call, or one per group of ``group_chars`` characters (:func:`text_groups`).
    ``shared``: ``embedder``'s encoder for concurrent callers, used in its place."""
    memories = list(memories)
    if embedder is None or not memories:
        return memories
    todo = [i for i, m in enumerate(memories) if m.embedding is None]
    texts = [memories[i].key_text for i in todo]
    for group in text_groups(texts, group_chars):
        chunk = [texts[g] for g in group]
        vectors = (
            shared.encode(chunk)
            if shared is not None
            else embedder.encode(chunk, batch_size=batch_size)
        )
        for g, vec in zip(group, vectors, strict=True):
            memories[todo[g]] = memories[todo[g]].with_embedding(vec)
    return memories


@dataclass(frozen=True)
class Ingested:
    """What one ingestion really wrote. ``duplicates``: records already stored (or
    repeated); ``status``: "older_copy" when the store holds a newer copy of the session."""

    added: list[Memory] = field(default_factory=list)
    duplicates: int = 0
    status: Literal["added", "unchanged", "older_copy"] = "unchanged"


# -- the service -------------------------------------------------------------------
class MemoryService:
    """Long-term memory over a memory store (any :class:`~mnemoray.memory.store.protocol.
    MemoryBackend`: Parquet + FAISS, or LanceDB): ingest sessions, recall, forget.

    The one place for recall, add, forget and the reload policy; the CLI, the
    HTTP API, MCP and the agent tools all call it and add only transport.
    Every operation is scoped to one (app, user): no call reads or hides
    another user's rows.

    ``embedder``: a built embedder or a spec (opened here); None = keyword-only
    recall (BM25 + entity). ``ttl_s``:
    distilled records expire that long after ingestion. ``chunk_turns``:
    messages per raw chunk record. ``reloader``: when reads see new store
    versions (default: every call checks the manifest; a server passes a
    watching one). ``app_configs``: per-app retrieval settings over ``config``.
    ``query_cache``: recent query vectors (shared with a server's batched encoder).
    ``hooks``: lifecycle hooks (:mod:`mnemoray.memory.service.hooks`; default a new registry).
    ``summarize``: False stores raw chunks only (no summary or facts; the summarizer
    is never called); ``summarize_for`` decides it per app (a server sets it).
    """

    def __init__(
        self,
        store: MemoryBackend,
        embedder: Embedder | EmbedderSpec | str | None,
        summarizer: Summarizer,
        config: RetrievalConfig | None = None,
        *,
        ttl_s: float | None = None,
        chunk_turns: int = 4,
        reloader: SnapshotReloader | None = None,
        app_configs: Mapping[str, RetrievalConfig] | None = None,
        query_cache: QueryVectorCache | None = None,
        hooks: MemoryHooks | None = None,
        summarize: bool = True,
    ) -> None:
        if not isinstance(store, MemoryBackend):
            raise TypeError(
                f"store: expected a memory store (MemoryBackend), got {type(store).__name__}"
            )
        # A spec is opened, a built embedder checked, both against the store's model.
        embedder = open_embedder(embedder, store, "write")
        self.store = store
        self.embedder = embedder
        self.summarizer = summarizer
        self.retriever = Retriever(config)
        self._app_retrievers = {app: Retriever(c) for app, c in dict(app_configs or {}).items()}
        self.ttl_s = ttl_s
        self.chunk_turns = chunk_turns
        self.reloader = reloader or SnapshotReloader(store.load, store.root, stamp=store.stamp)
        self.query_cache = query_cache if query_cache is not None else QueryVectorCache()
        self._write_lock = threading.Lock()
        self._adds = GroupCommit(self._commit_adds)
        # Concurrent online adds embed in one model call (each still on a caller's thread).
        self._shared_encoder = CoalescedEncoder(embedder) if embedder is not None else None
        # Merges the small segments online writes leave (a server sets one; None: only
        # ``mnemoray compact`` merges them).
        self.merge: BackgroundMerge | None = None
        self.hooks = hooks if hooks is not None else MemoryHooks()
        # app_name -> the summarizer's prompt for its memories (None: the default).
        self.memory_prompt: Callable[[str], str | None] = lambda _app: None
        # app_name -> whether its sessions are summarized (False: raw chunks only).
        self.summarize_for: Callable[[str], bool] = lambda _app: summarize
        # Agent-only memories and cross-app sharing (mnemoray.memory.store.scopes; a server sets
        # it from its ``scopes`` settings): by default none is shared, none agent-stamped.
        self.scopes: ScopePolicy = NO_SHARING
        # Its parts, each reading the service at call time; the public methods below
        # delegate to them.
        self.lifecycle = MemoryLifecycle(self)
        self.graph_reads = GraphReads(self)
        self.profiles = ProfileReads(self)

    @classmethod
    def open(
        cls,
        store_dir: str | Path | MemoryBackend,
        embedder: str | EmbedderSpec | Embedder | None = "default",
        summarizer: str | Summarizer = "extractive",
        shards: int | None = None,
        config: RetrievalConfig | None = None,
        **options: Any,
    ) -> MemoryService:
        """A service over the store at ``store_dir`` (created on first write): a path
        or ``parquet://DIR`` (Parquet + FAISS), or ``lancedb://DIR`` (LanceDB), see
        :func:`~mnemoray.memory.store.protocol.open_backend`; or an opened store.

        ``embedder``: an :class:`~mnemoray.embedders.EmbedderSpec` or its config
        string ("default": the store's model, MiniLM for a new store; a local path or
        hub name; "none" or None: keyword-only), or a built embedder.
        ``summarizer``: a registered summarizer name or an instance.
        """
        store = open_backend(store_dir, shards)
        summ = get_summarizer(summarizer) if isinstance(summarizer, str) else summarizer
        return cls(store, embedder, summ, config, **options)

    @property
    def config(self) -> RetrievalConfig:
        return self.retriever.config

    def retriever_for(self, app_name: str) -> Retriever:
        return self._app_retrievers.get(app_name, self.retriever)

    def close(self) -> None:
        if self.merge is not None:
            self.merge.stop()
        self.reloader.stop()
        self.hooks.stop()

    # -- snapshot ---------------------------------------------------------------
    def snapshot(self) -> StoreSnapshot:
        """The current snapshot (see :class:`SnapshotReloader` for when it changes)."""
        return self.reloader.current()

    # -- writing ----------------------------------------------------------------
    def add_session(self, session: Session) -> list[Memory]:
        """Distill, embed and commit a session; returns the records newly written
        (see :meth:`ingest_session`)."""
        return self.ingest_session(session).added

    def ingest_session(
        self, session: Session, *, session_hash: str | None = None, agent_name: str | None = None
    ) -> Ingested:
        """Distill, embed and commit a session; what was really written.

        A session whose content hash (``session_hash``, default the hash of
        ``session``; the HTTP API passes the hash of the posted dict) is in the
        ledger is skipped. A grown session (same id, more events) adds its new
        records and forgets the ones they replace (see :func:`superseded_ids`), so
        the session keeps one current summary; identical records stay. An older
        copy than the one stored (:func:`is_older_copy`) is ledgered and changes
        nothing else. ``agent_name``: whose memories these are (None: as the app's
        ``memory_scope`` says, :func:`~mnemoray.memory.store.scopes.session_agent`).
        """
        from mnemoray.memory.store.graph.commit import safe_extract

        if not isinstance(session, Session):
            raise TypeError(f"session: expected a Session, got {type(session).__name__}")
        session_hash = session_hash or session_content_hash(session)
        agent = session_agent(session, self.scopes.memory_scope(session.app_name), agent_name)
        if self.store.ledger_contains([session_hash]):  # the common repeat: no work at all
            return Ingested([], 0, "unchanged")
        # Distilling, the graph extract and embedding read only the session: they run
        # before the write lock, so another tenant's write does not wait for them. What
        # the lock protects (the ledger, older copies, stored records) is decided under it.
        records = self._distill(session, agent)
        found = safe_extract(session, records) if self.store.has_graph else None
        records = self._embed_unstored(session, records)
        with self._write_lock:
            if self.store.ledger_contains([session_hash]):  # ingested meanwhile
                return Ingested([], 0, "unchanged")
            self.reloader.refresh()  # decide against what is committed now
            snap = self.snapshot()
            try:
                if is_older_copy(snap, session.key, session_version(session)):
                    self.store.ledger_add([session_hash])
                    return Ingested([], 0, "older_copy")
                stored = {r["content_hash"] for r in stored_session_rows(snap, *session.key)}
                fresh = [m for m in records if m.content_hash not in stored]
                replaced = superseded_ids(snap, session.key, records)
                # Forget first, then write records + ledger in one commit: a crash in
                # between leaves the session unledgered, so the next ingestion redoes it.
                if replaced:
                    self.store.forget(memory_ids=replaced, owner=session.key[:2], reason=SUPERSEDED)
                    self.hooks.emit(
                        MemoryEvent(
                            "on_memory_forgotten",
                            *session.key[:2],
                            tuple(replaced),
                            reason=SUPERSEDED,
                            scope="memory",
                        )
                    )
                # The session's entity graph evidence commits with its records.
                graph = [(session_hash, found)] if found is not None else []
                added = self._write(fresh, [session_hash], graph=graph)
                return Ingested(added, len(records) - len(added), "added" if added else "unchanged")
            finally:
                self.reloader.refresh()

    def _distill(self, session: Session, agent: str) -> list[Memory]:
        """The session's records, agent-stamped and versioned (the app's memory prompt,
        ``memory_prompt``, if it has one)."""
        from mnemoray.memory.records.distill import distill_session

        prompt = self.memory_prompt(session.app_name)
        summarizer = self.summarizer if prompt is None else self.summarizer.with_prompt(prompt)
        return stamp_version(
            stamp_agent(
                distill_session(
                    session,
                    summarizer,
                    chunk_turns=self.chunk_turns,
                    ttl_s=self.ttl_s,
                    summarize=self.summarize_for(session.app_name),
                ),
                agent,
            ),
            session,
        )

    def _embed_unstored(self, session: Session, records: list[Memory]) -> list[Memory]:
        """``records`` with those the store does not hold yet embedded (a grown session
        re-embeds only its new records). Read without the lock: a record stored now but
        gone by the commit is embedded there (:meth:`_write`)."""
        if self.embedder is None:
            return records
        self.reloader.refresh()
        stored = {r["content_hash"] for r in stored_session_rows(self.snapshot(), *session.key)}
        todo = [i for i, m in enumerate(records) if m.content_hash not in stored]
        embedded = embed_memories(
            [records[i] for i in todo], self.embedder, group_chars=EMBED_GROUP_CHARS
        )
        out = list(records)
        for i, m in zip(todo, embedded, strict=True):
            out[i] = m
        return out

    def add_memories(self, memories: Sequence[Memory], *, actor: str = "") -> list[Memory]:
        """Store raw memories online (embedded here when they carry no embedding); returns
        the ones really written (not those already stored or repeated in ``memories``).
        ``actor``: who added them (passed to ``on_memory_created`` hooks).

        Adds that arrive while a commit runs share the next one (:mod:`.group_commit`);
        each returns once the commit holding its memories is durable. Each add is embedded
        on its caller's thread first, so a slow embed delays no one else's commit. The
        store checks at commit (a stored copy, an id with other content) decide, so two
        adds of one memory at once still store it once. Adds embedding at once share one
        model call (:class:`~mnemoray.embedders.CoalescedEncoder`)."""
        memories = list(memories)
        for i, m in enumerate(memories):
            if not isinstance(m, Memory):
                raise TypeError(f"memories[{i}]: expected a Memory, got {type(m).__name__}")
        if self.embedder is None:
            memories = [
                m if m.embedding is None else m.with_derived(embedding=None) for m in memories
            ]
        else:
            memories = embed_memories(
                memories,
                self.embedder,
                group_chars=EMBED_GROUP_CHARS,
                shared=self._shared_encoder,
            )
        try:
            written = self._adds.submit(memories)
        finally:
            # Read-your-writes: this caller's next read sees its commit. After the group's
            # commit, not in it: the next group commits meanwhile (one caller loads, the
            # others find the snapshot loaded).
            self.reloader.refresh()
        emit_memories(self.hooks, "on_memory_created", written, actor=actor)
        return written

    def _commit_adds(self, memories: list[Memory]) -> list[Memory]:
        """One group commit of online adds (:attr:`_adds`), under the write lock."""
        with self._write_lock:
            return self._write(memories, [], index_kind="flat", emit=False)

    def _write(
        self,
        memories: list[Memory],
        session_hashes: list[str],
        index_kind: str = "auto",
        actor: str = "",
        graph: Sequence[tuple[str, Any]] = (),
        emit: bool = True,
    ) -> list[Memory]:
        extra: dict[str, Any] = {"graph": graph} if graph else {}  # only a Parquet store takes one
        if not memories:
            if session_hashes:
                self.store.commit(None, session_hashes=session_hashes, **extra)
            return []
        model, dim = write_model(self.store, self.embedder)
        # Callers embed before the lock; only a record they could not know of is left.
        memories = embed_memories(memories, self.embedder, group_chars=EMBED_GROUP_CHARS)
        result: WriteResult = self.store.write_segment(
            memories,
            model,
            dim,
            index_kind=index_kind,
            session_hashes=session_hashes,
            summarizer=getattr(self.summarizer, "name", None),
            **extra,
        )
        log.debug(
            "memory write: %d rows, %d skipped, version %d",
            result.written,
            result.skipped,
            result.version,
        )
        written = self._written_hashes(result)
        shards = self.store.shards
        out: list[Memory] = []
        for m in memories:  # each written row once, in the caller's order
            if m.content_hash in written:
                written.discard(m.content_hash)
                out.append(replace(m, shard=shard_of(m.app_name, m.user_id, shards)))
        if emit:
            emit_memories(self.hooks, "on_memory_created", out, actor=actor)
        if self.merge is not None and result.segments:
            self.merge.poke()  # once the written rows are read back (they may be merged next)
        return out

    def _written_hashes(self, result: WriteResult) -> set[str]:
        """Content hashes of the rows a write committed (not the duplicates it skipped)."""
        return self.store.written_hashes(result)

    # -- recall -----------------------------------------------------------------
    def query_model(self, snap: StoreSnapshot | None = None) -> tuple[str, int] | None:
        """(model_id, dim) a query vector must have; None: recall is keyword-only."""
        m = (snap or self.snapshot()).manifest
        if self.embedder is None or m.embedding_model is None or m.keyword_only:
            return None
        return (self.embedder.model_id, self.embedder.dim)

    def has_memories(self, app_name: str, user_id: str, snap: StoreSnapshot | None = None) -> bool:
        """Whether the user has any live memory (validates the ids), here or in an app
        that shares with this one (mnemoray.memory.store.scopes)."""
        snap = snap or self.snapshot()
        retriever = self.retriever_for(app_name)
        return any(
            retriever.user_candidates(snap, app, user_id).size > 0
            for app in (app_name, *self.scopes.readable_apps(app_name))
        )

    def resolve(
        self,
        app_name: str,
        user_id: str | None,
        query: str,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        **options: Any,
    ) -> RecallRequest:
        """The checked request of one recall (``user_id`` None: app-wide), its mode
        defaulted from the app's retrieval config; ``options``: the per-recall ones of
        :func:`~mnemoray.memory.recall.request.resolve_recall` (explain, now, shared,
        recalled, budget_tokens)."""
        config = self.retriever_for(app_name).config
        return resolve_recall(config, app_name, user_id, query, top_k, mode, filters, **options)

    def needs_vector(self, request: RecallRequest, snap: StoreSnapshot | None = None) -> bool:
        """Whether ``request`` needs its query embedded (:meth:`RecallRequest.needs_vector`):
        this service's query model matches the store in ``snap``, and the scope (the user,
        with the apps sharing with it; or the app) has memories."""
        snap = snap or self.snapshot()
        return request.needs_vector(
            embeds=self.query_model(snap) is not None,
            has_memories=lambda: self._scope_has_memories(request, snap),
        )

    def _scope_has_memories(self, request: RecallRequest, snap: StoreSnapshot) -> bool:
        if request.user_id is None:
            return bool(snap.count(request.app_name))
        if not request.shared:
            retriever = self.retriever_for(request.app_name)
            cands = retriever.user_candidates(snap, request.app_name, request.user_id)
            return cands.size > 0
        return self.has_memories(request.app_name, request.user_id, snap)

    def needs_query_vector(
        self,
        app_name: str,
        user_id: str,
        query: str,
        mode: str | None = None,
        snap: StoreSnapshot | None = None,
    ) -> bool:
        """Whether a recall needs the query embedded: a non-keyword mode on an embedded
        store and a user with rows (no model call for a new user); :meth:`needs_vector`
        of the request these arguments resolve to."""
        return self.needs_vector(self.resolve(app_name, user_id, query, mode=mode), snap)

    def _query_vec(self, query: str) -> np.ndarray:
        if self.embedder is None:
            raise ConfigError("this service has no query embedder", field="embedder")
        embedder = self.embedder
        return self.query_cache.encode(query, lambda text: embedder.encode([text])[0])

    def search(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        *,
        query_vec: np.ndarray | None = None,
        snap: StoreSnapshot | None = None,
        recalled: bool = True,
        shared: bool = True,
    ) -> list[RecallResult]:
        """Best ``top_k`` memories of one user (only that user's rows are read).

        ``query_vec``: the query already embedded (by a server's batched encoder);
        otherwise it is embedded here when :meth:`needs_query_vector` says so.
        ``snap``: the snapshot to search, when the caller already decided on it (the
        one it asked ``needs_query_vector``); default the current one. ``recalled``:
        tell ``on_memory_recalled`` hooks (False for a look that is no recall, e.g. the
        preview of a forget by query). ``shared``: include the same user's memories of
        the apps that share with this one (``scopes``); each result names its owner app.
        The agent whose view it is: ``filters["agent_name"]``. :meth:`recall` of the
        request these arguments resolve to.
        """
        request = self.resolve(
            app_name, user_id, query, top_k, filters, mode, recalled=recalled, shared=shared
        )
        return self.recall(request, query_vec=query_vec, snap=snap)

    def recall(
        self,
        request: RecallRequest,
        *,
        query_vec: np.ndarray | None = None,
        snap: StoreSnapshot | None = None,
    ) -> list[RecallResult]:
        """The results of a resolved recall (:meth:`resolve`), best first: one user's
        (only that user's rows are read), or an app's when ``request.user_id`` is None.
        ``query_vec`` / ``snap``: as for :meth:`search`."""
        snap = snap or self.snapshot()
        if not request.uses_dense:
            query_vec = None
        elif query_vec is not None:
            check_query_vector(snap, self.query_model(snap), query_vec)
        elif self.needs_vector(request, snap):
            query_vec = self._query_vec(request.query)
        retriever = self.retriever_for(request.app_name)
        if request.user_id is None:
            return retriever.recall_app(snap, request, query_vec)
        user_id = request.user_id
        apps = self.scopes.readable_apps(request.app_name) if request.shared else ()
        check_readable(snap, self.store.load_shards, apps, user_id)
        results = retriever.recall_user(snap, request, query_vec, shared_apps=apps)
        if results and request.recalled and self.hooks.wants("on_memory_recalled"):
            # One event per owner app: ids are unique per (app, user), and recall counts
            # (eviction by use) belong to the app that holds the memory.
            for owner in dict.fromkeys(r.memory.app_name for r in results):
                self.hooks.emit(
                    MemoryEvent(
                        "on_memory_recalled",
                        owner,
                        user_id,
                        tuple(r.memory.memory_id for r in results if r.memory.app_name == owner),
                        query=request.query,
                    )
                )
        return results

    def search_app(
        self,
        app_name: str,
        query: str,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
    ) -> list[RecallResult]:
        """Best ``top_k`` memories across an app's users (ANN candidates, re-ranked):
        :meth:`recall` of the app-wide request these arguments resolve to."""
        return self.recall(self.resolve(app_name, None, query, top_k, filters, mode))

    def memory_search(self, agent_name: str | None = None) -> MemorySearch:
        """A ``Services(memory_search=...)`` hook: (app, user, query, top_k) -> snippets;
        ``agent_name``: the compiled agent, whose own memories it also sees."""
        flt = RecallFilters(agent_name=agent_name)

        def search(
            app_name: str, user_id: str, query: str, top_k: int, /, **budget: int
        ) -> list[MemorySnippet]:
            request = self.resolve(app_name, user_id, query, top_k, flt, None, **budget)
            return [r.snippet() for r in self.recall(request)]

        return search

    def load_memory(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int = 5,
        limit: Any = None,
        agent_name: str | None = None,
        budget_tokens: Any = None,
    ) -> list[dict[str, Any]] | dict[str, str]:
        """The ``load_memory`` tool's answer: :meth:`RecallResult.to_dict`, best first.

        ``limit``: the model's own argument (None: ``top_k``, the app's default); one
        outside 1..``MAX_MEMORY_LIMIT`` answers an error result naming ``limit``.
        When recall fails for a reason that is not the caller's (a damaged store, an
        embedder failure: :func:`~mnemoray.compiler.degrade.degradable`), an error
        result the model can read, ``{"error": "memory is unavailable: ..."}``; a
        caller's error (an empty query) still raises. ``agent_name``: the calling agent
        (it also sees its own agent-only memories)."""
        if (bad := limit_error(limit) or budget_error(budget_tokens)) is not None:
            return bad
        try:
            request = self.resolve(
                app_name,
                user_id,
                query,
                top_k if limit is None else limit,
                RecallFilters(agent_name=agent_name),
                budget_tokens=budget_tokens,
            )
            return [r.to_dict() for r in self.recall(request)]
        except Exception as exc:
            if not degradable(exc):
                raise
            log.warning(
                "load_memory for %s/%s answers an error: %s: %s",
                app_name,
                user_id,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            return unavailable_result("memory", exc)

    # -- lifecycle: hooks, forgetting, corrections (MemoryLifecycle) ------------------
    def on_memory_created(self, fn: Hook) -> Hook:
        """Register ``fn`` for ``on_memory_created`` (:mod:`~mnemoray.memory.service.hooks`)."""
        return self.lifecycle.on_memory_created(fn)

    def on_memory_recalled(self, fn: Hook) -> Hook:
        """Register ``fn`` for ``on_memory_recalled``."""
        return self.lifecycle.on_memory_recalled(fn)

    def on_memory_forgotten(self, fn: Hook) -> Hook:
        """Register ``fn`` for ``on_memory_forgotten``."""
        return self.lifecycle.on_memory_forgotten(fn)

    def forget_memory(
        self, app_name: str, user_id: str, memory_id: str, *, reason: str = "", actor: str = ""
    ) -> int:
        """Forget one memory of this user (:meth:`MemoryLifecycle.forget_memory`)."""
        return self.lifecycle.forget_memory(
            app_name, user_id, memory_id, reason=reason, actor=actor
        )

    def forget_memories(
        self,
        app_name: str,
        user_id: str,
        memory_ids: Sequence[str],
        *,
        reason: str = "",
        actor: str = "",
        scope: str = "memory",
    ) -> int:
        """Forget these memories of this user in one commit; how many were live
        (:meth:`MemoryLifecycle.forget_memories`)."""
        return self.lifecycle.forget_memories(
            app_name, user_id, memory_ids, reason=reason, actor=actor, scope=scope
        )

    def forget_session(
        self, app_name: str, user_id: str, session_id: str, *, reason: str = "", actor: str = ""
    ) -> int:
        """Forget a session's memories (:meth:`MemoryLifecycle.forget_session`)."""
        return self.lifecycle.forget_session(
            app_name, user_id, session_id, reason=reason, actor=actor
        )

    def forget_user(self, app_name: str, user_id: str, *, reason: str = "", actor: str = "") -> int:
        """Forget every memory of the user (:meth:`MemoryLifecycle.forget_user`)."""
        return self.lifecycle.forget_user(app_name, user_id, reason=reason, actor=actor)

    def forgotten(self, app_name: str, user_id: str) -> list[dict[str, Any]]:
        """This user's forget records, oldest first (:meth:`MemoryLifecycle.forgotten`)."""
        return self.lifecycle.forgotten(app_name, user_id)

    def edit_memory(
        self, app_name: str, user_id: str, memory_id: str, text: str, *, actor: str = ""
    ) -> Memory:
        """Replace the text of this user's memory; the corrected record
        (:meth:`MemoryLifecycle.edit_memory`)."""
        return self.lifecycle.edit_memory(app_name, user_id, memory_id, text, actor=actor)

    def memory_versions(self, app_name: str, user_id: str, memory_id: str) -> dict[str, Any]:
        """Every text of this user's memory, oldest first
        (:meth:`MemoryLifecycle.memory_versions`)."""
        return self.lifecycle.memory_versions(app_name, user_id, memory_id)

    def preview_forget(
        self,
        app_name: str,
        user_id: str,
        query: str,
        *,
        top_k: int = 10,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        ttl_s: float = forget_query.TOKEN_TTL_S,
    ) -> forget_query.ForgetPreview:
        """What a forget by ``query`` would remove, and its confirm token
        (:meth:`MemoryLifecycle.preview_forget`)."""
        return self.lifecycle.preview_forget(
            app_name, user_id, query, top_k=top_k, filters=filters, mode=mode, ttl_s=ttl_s
        )

    def confirm_forget(
        self,
        app_name: str,
        user_id: str,
        confirm: str,
        *,
        memory_ids: Sequence[str] | None = None,
        reason: str = "",
        actor: str = "",
    ) -> dict[str, Any]:
        """Forget what the preview behind ``confirm`` listed
        (:meth:`MemoryLifecycle.confirm_forget`)."""
        return self.lifecycle.confirm_forget(
            app_name, user_id, confirm, memory_ids=memory_ids, reason=reason, actor=actor
        )

    # -- the entity graph (GraphReads) and profiles (ProfileReads) ----------------------
    def graph(self, app_name: str, user_id: str) -> UserGraph:
        """The user's entity graph, the caller's to change (:meth:`GraphReads.graph`)."""
        return self.graph_reads.graph(app_name, user_id)

    def neighbours(
        self,
        app_name: str,
        user_id: str,
        entity: str,
        depth: int = 2,
        types: Sequence[str] | None = None,
        at: float | str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> GraphAnswer:
        """What is within ``depth`` hops of ``entity`` (:meth:`GraphReads.neighbours`)."""
        return self.graph_reads.neighbours(app_name, user_id, entity, depth, types, at, limit)

    def profile(self, app_name: str, user_id: str) -> UserProfile:
        """The user's profile at the current store version (:meth:`ProfileReads.profile`)."""
        return self.profiles.profile(app_name, user_id)

    def domain_part(self, app_name: str) -> DomainPart:
        """This replica's share of the app's domain index (:meth:`ProfileReads.domain_part`)."""
        return self.profiles.domain_part(app_name)

    def domain(self, app_name: str) -> DomainIndex:
        """The app's domain index at the current store version (:meth:`ProfileReads.domain`)."""
        return self.profiles.domain(app_name)

    def profile_source(self) -> ProfileSource:
        """A ``Services(user_profile=...)`` hook (:meth:`ProfileReads.profile_source`)."""
        return self.profiles.profile_source()

    # -- reading ------------------------------------------------------------------
    def list_memories(
        self,
        app_name: str,
        user_id: str,
        after: tuple[float, str] | None = None,
        limit: int = 50,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[list[Memory], bool]:
        """A page of the user's live memories, oldest first, strictly after the
        ``(created_at, memory_id)`` key ``after``; and whether more follow. Filters:
        ``kind``, ``session_id``, and ``since`` / ``until`` (epoch seconds): the
        remembered events' span (else the time it was stored) overlaps them."""
        if since is not None and until is not None and since > until:
            raise InvalidInput(
                f"must not be before since ({since!r}), got {until!r}", field="until"
            )
        rows = [
            m
            for m in self.snapshot().rows_for_user(app_name, user_id)
            if (kind is None or m.kind == kind)
            and (session_id is None or m.session_id == session_id)
            and (since is None or event_span(m)[1] >= since)
            and (until is None or event_span(m)[0] <= until)
        ]
        if after is not None:
            rows = [m for m in rows if (m.created_at, m.memory_id) > after]
        return rows[:limit], len(rows) > limit

    def stats(self) -> dict[str, Any]:
        snap = self.snapshot()
        m = snap.manifest
        return {
            "version": m.version,
            "rows": m.rows,
            "tombstones": m.tombstone_count,
            "segments": sum(len(s) for s in snap.segments),
            "shards": m.shards,
            "loaded_shards": None
            if self.store.load_shards is None
            else sorted(self.store.load_shards),
            "embedding_model": m.embedding_model,
            "dim": m.dim,
            **self.reloader.stats(),
            **self.hooks.stats(),
        }


def check_query_vector(
    snap: StoreSnapshot, model: tuple[str, int] | None, query_vec: np.ndarray
) -> None:
    """A ready-made query vector must come from the store's model."""
    m = snap.manifest
    if model is None or m.embedding_model is None or m.keyword_only:
        return
    check_model(model, m.embedding_model, m.dim, where="the store")
    if np.shape(query_vec) != (m.dim,):
        raise StoreError(f"expected shape ({m.dim},), got {np.shape(query_vec)}", field="query_vec")


__all__ = [
    "EMBED_GROUP_CHARS",
    "Ingested",
    "MemoryService",
    "check_query_vector",
    "embed_memories",
    "text_groups",
]
