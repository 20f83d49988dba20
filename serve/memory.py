"""The memory service as a server holds it: hot reload without blocking, remote models.

- :class:`SnapshotReloader` watches ``manifest.json`` from a background thread,
  builds the new snapshot there and swaps one reference; requests read that
  reference and never wait for a load (the core ``MemoryService.snapshot`` loads
  under a lock, so every request in flight would queue behind a reload).
- :class:`ServingMemory` is the core ``MemoryService`` with that snapshot policy
  plus the operations the HTTP API needs, keyed ``(app_name, user_id)`` so the
  same object serves a whole store (in the ingress) or some shards of it (in
  the ``Index`` deployment, ``MemoryStore(load_shards=...)``).
- :class:`RemoteEmbedder` / :class:`RemoteSummarizer` put the ``Embedder`` and
  ``Summarizer`` deployments behind the core interfaces, so the core write path
  (distill -> embed -> commit) runs unchanged with its models in other replicas.

No logic of the core is rewritten here: recall is ``Retriever.search_user``,
writes are ``MemoryService.add_session`` / ``add_memories``, forgetting is
``MemoryStore.forget``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.embedders import Embedder
from mnemoray.events import Event
from mnemoray.memory.layout import MANIFEST
from mnemoray.memory.manifest import StoreError
from mnemoray.memory.record import Memory
from mnemoray.memory.retrieval import RecallFilters, RecallResult, RetrievalConfig, check_mode
from mnemoray.memory.service import MemoryService
from mnemoray.memory.snapshot import StoreSnapshot
from mnemoray.memory.store import MemoryStore
from mnemoray.session import Session, SessionError
from mnemoray.summarizers.base import Summarizer, Summary

log = logging.getLogger(__name__)

Stamp = tuple[int, int, int] | None


def manifest_stamp(root: Path) -> Stamp:
    try:
        st = os.stat(root / MANIFEST)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class SnapshotReloader:
    """The current store snapshot, replaced atomically when the manifest changes.

    ``current()`` is a plain attribute read. ``refresh()`` (the watcher thread
    every ``interval_s``, or a writer right after its commit) stats the manifest
    and, if it changed, loads the new snapshot (unchanged segments are reused by
    the store) and then swaps the reference. A request that started on the old
    snapshot finishes on it: snapshots are immutable and their files are
    memory-mapped, so even a segment deleted meanwhile stays readable.
    """

    def __init__(self, load: Callable[[], StoreSnapshot], root: Path,
                 interval_s: float = 0.25) -> None:
        self._load = load
        self._root = root
        self.interval_s = interval_s
        self._snap: StoreSnapshot | None = None
        self._stamp: Stamp = None
        self._lock = threading.Lock()  # one load at a time; readers never take it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reloads = 0  # swaps after the first load
        self.failures = 0
        self.last_load_s = 0.0
        self.last_error: str | None = None

    def current(self) -> StoreSnapshot:
        snap = self._snap
        if snap is None:
            self.refresh()
            snap = self._snap
            assert snap is not None
        return snap

    def refresh(self) -> bool:
        """Load and swap if the manifest changed; True if it swapped."""
        if self._snap is not None and manifest_stamp(self._root) == self._stamp:
            return False
        with self._lock:
            # Stat first, load second: a commit in between is caught by the next refresh.
            stamp = manifest_stamp(self._root)
            if self._snap is not None and stamp == self._stamp:
                return False
            start = time.perf_counter()
            snap = self._load()
            first = self._snap is None
            self._snap, self._stamp = snap, stamp
            self.last_load_s = time.perf_counter() - start
            if not first:
                self.reloads += 1
            log.info("memory store snapshot: version %d loaded in %.1f ms", snap.version,
                     self.last_load_s * 1000)
            return True

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()

        def watch() -> None:
            while not self._stop.wait(self.interval_s):
                try:
                    self.refresh()
                    self.last_error = None
                except Exception as exc:  # a half-written store must not kill the watcher
                    self.failures += 1
                    self.last_error = str(exc)
                    log.exception("memory store reload failed; still serving version %s",
                                  None if self._snap is None else self._snap.version)

        self._thread = threading.Thread(target=watch, name="mnemoray-snapshot-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


# -- wire formats ------------------------------------------------------------------------
def memory_out(m: Memory) -> dict[str, Any]:
    d = m.to_dict()
    for name in ("key_text", "content_hash", "shard"):
        d.pop(name, None)
    return d


def recalled(r: RecallResult) -> dict[str, Any]:
    m = r.memory
    return {"memory_id": m.memory_id, "kind": m.kind, "text": m.text, "score": r.score,
            "signals": r.signals, "topics": list(m.topics), "key_facts": list(m.key_facts),
            "provenance": {"session_id": m.session_id,
                           "source_event_ids": list(m.source_event_ids),
                           "event_time_start": m.event_time_start,
                           "event_time_end": m.event_time_end, "created_at": m.created_at}}


def encode_cursor(created_at: float, memory_id: str) -> str:
    raw = json.dumps([created_at, memory_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, memory_id = json.loads(raw)
        return float(created_at), str(memory_id)
    except (ValueError, TypeError) as exc:
        raise StoreError("cursor: malformed; pass the next_cursor of the previous page") \
            from exc


class ServingMemory(MemoryService):
    """``MemoryService`` for a server: non-blocking reload and the API's operations.

    ``embedder`` embeds writes (the query vector arrives ready-made: the ingress
    embeds queries itself, micro-batched). Operations are ``op_<name>(app_name,
    user_id, **kwargs)`` and return JSON-ready values; :meth:`call` dispatches by
    name (how the ``Index`` deployment forwards them).
    """

    def __init__(self, store: MemoryStore, embedder: Embedder | None, summarizer: Summarizer,
                 config: RetrievalConfig | None = None, *, reload_interval_s: float = 0.25,
                 watch: bool = True, **options: Any) -> None:
        super().__init__(store, embedder, summarizer, config, **options)
        self.reloader = SnapshotReloader(store.load, store.root, reload_interval_s)
        self.reloader.current()  # load before serving
        if watch:
            self.reloader.start()

    def snapshot(self) -> StoreSnapshot:
        return self.reloader.current()

    def close(self) -> None:
        self.reloader.stop()

    # -- writes: current before, visible after -------------------------------------
    def add_session(self, session: Session) -> list[Memory]:
        self.reloader.refresh()
        try:
            return super().add_session(session)
        finally:
            self.reloader.refresh()

    def add_memories(self, memories: Sequence[Memory]) -> list[Memory]:
        try:
            return super().add_memories(memories)
        finally:
            self.reloader.refresh()

    def _forgot(self, n: int) -> int:
        self.reloader.refresh()
        return n

    # -- dispatch ----------------------------------------------------------------------
    OPS = frozenset({"recall", "has_rows", "add_session", "add_memories", "list_memories",
                     "forget_memory", "forget_session", "forget_user", "stats"})

    def call(self, op: str, app_name: str, user_id: str,
             kwargs: Mapping[str, Any] | None = None) -> Any:
        if op not in self.OPS:
            raise ValueError(f"op: unknown memory operation {op!r}")
        return getattr(self, f"op_{op}")(app_name, user_id, **dict(kwargs or {}))

    # -- operations -------------------------------------------------------------------
    def query_model(self) -> tuple[str, int] | None:
        """(model_id, dim) a query vector must have; None: recall is keyword-only."""
        m = self.snapshot().manifest
        if self.embedder is None or m.embedding_model is None or m.keyword_only:
            return None
        return (self.embedder.model_id, self.embedder.dim)

    def op_has_rows(self, app_name: str, user_id: str) -> bool:
        return self.retriever.user_candidates(self.snapshot(), app_name, user_id).size > 0

    def op_recall(self, app_name: str, user_id: str, query: str,
                  query_vec: np.ndarray | None = None, top_k: int = 5,
                  filters: RecallFilters | Mapping[str, Any] | None = None,
                  mode: str | None = None) -> dict[str, Any]:
        mode = check_mode(mode or self.config.mode)
        flt = RecallFilters.of(filters)
        snap = self.snapshot()
        m = snap.manifest
        if query_vec is not None and m.embedding_model is not None and not m.keyword_only \
                and (m.embedding_model, m.dim) != (getattr(self.embedder, "model_id", None),
                                                   getattr(self.embedder, "dim", None)):
            raise StoreError(f"embedder: store embeds with {m.embedding_model!r} "
                             f"(dim {m.dim}); this server does not")
        results = self.retriever.search_user(snap, app_name, user_id, query, query_vec, top_k,
                                             flt, mode)
        return {"memories": [recalled(r) for r in results], "store_version": snap.version}

    def op_add_session(self, app_name: str, user_id: str,
                       session: Session | Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(session, Session):
            raw = dict(session)
            for name, value in (("app_name", app_name), ("user_id", user_id)):
                if raw.get(name) is None:
                    raw[name] = value
                elif raw[name] != value:
                    raise SessionError(f"session.{name}: {raw[name]!r} does not match "
                                       f"{name} {value!r} of the request")
            try:
                session = Session.from_dict(raw)
            except SessionError as exc:
                raise SessionError(f"session.{exc}") from exc
        elif session.key[:2] != (app_name, user_id):
            raise SessionError("session: belongs to another app or user")
        added = self.add_session(session)
        return {"added": len(added), "memories": [memory_out(m) for m in added]}

    def op_add_memories(self, app_name: str, user_id: str,
                        memories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        records = []
        for i, raw in enumerate(memories):
            fields = {"session_id": "online", "kind": "fact",
                      **{k: v for k, v in raw.items() if v is not None}}
            try:
                records.append(Memory.from_dict({**fields, "app_name": app_name,
                                                 "user_id": user_id}))
            except ValueError as exc:
                raise StoreError(f"memories[{i}].{exc}") from exc
        added = self.add_memories(records)
        return {"added": len(added), "memories": [memory_out(m) for m in added]}

    def op_list_memories(self, app_name: str, user_id: str, cursor: str | None = None,
                         limit: int = 50) -> dict[str, Any]:
        rows = self.snapshot().rows_for_user(app_name, user_id)  # oldest first
        if cursor:
            after = decode_cursor(cursor)
            rows = [m for m in rows if (m.created_at, m.memory_id) > after]
        page = rows[:limit]
        more = len(rows) > limit
        return {"memories": [memory_out(m) for m in page],
                "next_cursor": encode_cursor(page[-1].created_at, page[-1].memory_id)
                if more and page else None}

    def op_forget_memory(self, app_name: str, user_id: str, memory_id: str) -> int:
        """Forget one memory of this user; 0 when the user has no such live memory
        (another tenant's memory id is never touched)."""
        snap = self.snapshot()
        key = pa.scalar(memory_id, pa.string())
        for seg, (start, end) in snap.user_spans(app_name, user_id):
            row = pc.index(seg.table["memory_id"].slice(start, end - start), key).as_py()
            if row >= 0:
                dead = snap.forgotten(seg)
                if dead is not None and dead[start + row]:
                    return 0
                return self._forgot(self.forget_memory(memory_id))
        return 0

    def op_forget_session(self, app_name: str, user_id: str, session_id: str) -> int:
        return self._forgot(self.forget_session(app_name, user_id, session_id))

    def op_forget_user(self, app_name: str, user_id: str) -> int:
        return self._forgot(self.forget_user(app_name, user_id))

    def op_stats(self, app_name: str = "", user_id: str = "") -> dict[str, Any]:
        snap = self.snapshot()
        m = snap.manifest
        return {"version": m.version, "rows": m.rows, "tombstones": m.tombstone_count,
                "segments": sum(len(s) for s in snap.segments), "shards": m.shards,
                "loaded_shards": None if self.store.load_shards is None
                else sorted(self.store.load_shards),
                "embedding_model": m.embedding_model, "dim": m.dim,
                "reloads": self.reloader.reloads, "reload_failures": self.reloader.failures,
                "last_load_ms": round(self.reloader.last_load_s * 1000, 3)}


# -- remote models behind the core interfaces ----------------------------------------------
def call_on_loop(loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[Any]],
                 timeout_s: float | None) -> Any:
    """Run ``await make()`` on the replica's event loop from a worker thread, blocking.

    Deployment handles are awaited on the loop they belong to: a sync ``.result()``
    is not available when Serve runs the router on the replica's own loop
    (``RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0``), and this works either way.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError("a blocking model call on the event loop would deadlock; call it "
                           "from a worker thread")

    async def run() -> Any:
        return await make()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout_s)


class RemoteEmbedder(Embedder):
    """The ``Embedder`` deployment as a core :class:`Embedder`. ``encode`` blocks, so it
    runs in worker threads (the write path does); the calls themselves are awaited on
    ``loop``. Large inputs fan out in chunks of ``chunk`` texts."""

    def __init__(self, handle: Any, model_id: str, dim: int, loop: asyncio.AbstractEventLoop,
                 *, chunk: int = 128, timeout_s: float = 300.0) -> None:
        self._handle = handle
        self._loop = loop
        self.model_id = model_id
        self.dim = dim
        self.chunk = chunk
        self.timeout_s = timeout_s

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        chunks = [texts[i:i + self.chunk] for i in range(0, len(texts), self.chunk)]

        async def fan_out() -> list[Any]:
            return list(await asyncio.gather(*(self._handle.encode.remote(c)
                                               for c in chunks)))

        parts = call_on_loop(self._loop, fan_out, self.timeout_s)
        return np.concatenate([np.asarray(p, dtype=np.float32) for p in parts])


class RemoteSummarizer(Summarizer):
    """The ``Summarizer`` deployment as a core :class:`Summarizer` (blocking, like
    :class:`RemoteEmbedder`)."""

    def __init__(self, handle: Any, name: str, loop: asyncio.AbstractEventLoop, *,
                 timeout_s: float = 600.0) -> None:
        self._handle = handle
        self._loop = loop
        self.name = name
        self.timeout_s = timeout_s

    def summarize(self, events: Sequence[Event]) -> Summary:
        return call_on_loop(self._loop, lambda: self._handle.summarize.remote(list(events)),
                            self.timeout_s)

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        return call_on_loop(
            self._loop, lambda: self._handle.summarize_many.remote([list(b) for b in batches]),
            self.timeout_s)
