"""What recall reads of a store snapshot: the candidate set of a scope (one user, a user
across the apps that share with it, an app), kept warm per scope by ``ScopeCache`` (the
base of :class:`~mnemoray.memory.recall.retriever.Retriever`), and a user's entity graph."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from mnemoray.errors import StoreCorrupt
from mnemoray.graph import UserGraph
from mnemoray.memory.recall.candidates import Candidates
from mnemoray.memory.recall.config import RetrievalConfig, check_ids
from mnemoray.memory.store.segment import LoadedSegment
from mnemoray.memory.store.snapshot import StoreSnapshot


class ScopeCache:
    """Candidate sets per scope, the least recently used dropped first (``Retriever``
    says how long one is kept)."""

    def __init__(self, config: RetrievalConfig | None = None) -> None:
        self.config = config or RetrievalConfig()
        self._cache: OrderedDict[tuple[Any, ...], Candidates] = OrderedDict()
        self._lock = threading.Lock()

    def _scope(
        self,
        snap: StoreSnapshot,
        spans: list[tuple[LoadedSegment, tuple[int, int]]],
        scope: tuple[str | None, ...],  # (app, user or None, shared users...)
    ) -> Candidates:
        # Tombstone files are only ever appended (a compaction that retires some
        # also rewrites the segments, renaming them): count + last name identify them.
        tombs = snap.manifest.tombstones
        key = (
            scope,
            tuple((s.shard, s.name, span) for s, span in spans),
            (len(tombs), tombs[-1] if tombs else ""),
        )
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        cands = Candidates.from_spans(snap, spans)
        with self._lock:
            self._cache[key] = cands
            # Drop older versions of this scope first, then the least recently used.
            for old in [k for k in self._cache if k[0] == scope and k != key]:
                del self._cache[old]
            while len(self._cache) > self.config.cache_scopes:
                self._cache.popitem(last=False)
        return cands

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def user_candidates(self, snap: StoreSnapshot, app: str, user: str) -> Candidates:
        check_ids(app, user)
        return self._scope(snap, snap.user_spans(app, user), (app, user))


def user_graph(snap: StoreSnapshot, app: str, user: str) -> UserGraph | None:
    """The user's entity graph in ``snap``; None where there is none to ask (a store
    that keeps no graph, a damaged graph shard): recall then goes without the graph."""
    view = getattr(snap, "graph", None)
    if view is None:
        return None
    try:
        return view.user(app, user)
    except StoreCorrupt:
        return None
