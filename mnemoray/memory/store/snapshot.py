"""A read-only view of one committed manifest version of a memory store.

Forgotten (tombstoned) and expired rows are never returned. User-scoped
search is exact over the user's contiguous slice of each segment of the
user's shard; app-wide search uses each segment's ANN index.

A shard whose files could not be loaded is *damaged*: every read that would
touch it raises :class:`StoreCorrupt` (never a partial answer), while tenants
of the other shards are served as usual.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.errors import StoreCorrupt, StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.index import AUTO_FLAT_MAX, search_ann, search_range
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.manifest import Manifest
from mnemoray.memory.store.rows import rows_to_memories
from mnemoray.memory.store.scopes import agent_rows
from mnemoray.memory.store.segment import LoadedSegment, Range
from mnemoray.memory.store.tombstones import Tombstone, dead_rows

if TYPE_CHECKING:
    from mnemoray.memory.store.graph.view import GraphView

# Receives the table slice of candidate rows, returns a boolean keep-mask of
# the same length (e.g. a session, kind or time-range filter).
MaskFn = Callable[[pa.Table], np.ndarray]


class RowFilter(Protocol):
    """Recall filters as a search takes them (``retrieval.RecallFilters``)."""

    @property
    def empty(self) -> bool: ...

    def mask_table(self, table: pa.Table) -> np.ndarray: ...


def _both(a: MaskFn, b: MaskFn) -> MaskFn:
    return lambda table: np.asarray(a(table), dtype=bool) & np.asarray(b(table), dtype=bool)


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float  # inner product of unit vectors = cosine similarity


class StoreSnapshot:
    # search_app answers an app's slice of a segment exactly below this many
    # rows (same cost argument as index.AUTO_FLAT_MAX), by ANN above it.
    exact_max_rows: int = AUTO_FLAT_MAX

    def __init__(
        self,
        manifest: Manifest,
        segments: list[list[LoadedSegment]],
        tombstones: list[Tombstone],
        damaged: Mapping[int, str] | None = None,
        *,
        graph: GraphView | None = None,
    ) -> None:
        self.manifest = manifest
        # The entity graph of this version (mnemoray.memory.store.graph.view); None: a
        # snapshot built without one (a forget's count) has no graph to ask.
        self.graph = graph
        self.segments = segments  # per shard, in commit order
        self.tombstones = tombstones
        self.damaged = dict(damaged or {})  # shard -> why it could not be loaded
        self._dead = {id(seg): dead_rows(seg, tombstones) for segs in segments for seg in segs}

    @property
    def version(self) -> int:
        return self.manifest.version

    @property
    def shards(self) -> int:
        return self.manifest.shards

    # -- damaged shards --------------------------------------------------
    def check_shard(self, shard: int) -> None:
        """Raise StoreCorrupt if ``shard`` could not be loaded."""
        if shard in self.damaged:
            raise StoreCorrupt(self.damaged[shard])

    def check_healthy(self) -> None:
        """Raise StoreCorrupt if any loaded shard is damaged (store-wide reads, compaction)."""
        if self.damaged:
            self.check_shard(min(self.damaged))

    # -- row liveness ----------------------------------------------------
    def _keep(
        self, seg: LoadedSegment, span: Range, now: float, mask_fn: MaskFn | None = None
    ) -> np.ndarray | None:
        """Keep-mask over rows [start, end): live, unexpired, passing mask_fn (None = all)."""
        start, end = span
        keep: np.ndarray | None = None
        dead = self._dead[id(seg)]
        if dead is not None:
            keep = ~dead[start:end]
        if seg.min_expiry <= now:
            alive = ~(seg.expires[start:end] <= now)  # NaN (no TTL) compares False
            keep = alive if keep is None else keep & alive
        if mask_fn is not None:
            chosen = np.asarray(mask_fn(seg.table.slice(start, end - start)), dtype=bool)
            if chosen.shape != (end - start,):
                raise StoreError(
                    f"mask_fn: returned shape {chosen.shape}, expected ({end - start},)"
                )
            keep = chosen if keep is None else keep & chosen
        return keep

    def _live_rows(self, seg: LoadedSegment, span: Range, now: float) -> np.ndarray:
        keep = self._keep(seg, span, now)
        rows = np.arange(span[0], span[1])
        return rows if keep is None else rows[keep]

    def live_rows(self, seg: LoadedSegment, now: float | None = None) -> np.ndarray:
        """Row numbers of ``seg``'s live rows (not forgotten, not expired)."""
        return self._live_rows(seg, (0, seg.rows), time.time() if now is None else now)

    def _user_spans(self, app: str, user: str) -> Iterator[tuple[LoadedSegment, Range]]:
        shard = shard_of(app, user, self.shards)
        self.check_shard(shard)
        for seg in self.segments[shard]:
            span = seg.ranges.get((app, user))
            if span is not None:
                yield seg, span

    def _app_spans(self, app: str) -> Iterator[tuple[LoadedSegment, Range]]:
        self.check_healthy()  # an app spans every shard: no partial answers
        for segs in self.segments:
            for seg in segs:
                span = seg.app_ranges.get(app)
                if span is not None:
                    yield seg, span

    def _all_spans(self) -> Iterator[tuple[LoadedSegment, Range]]:
        self.check_healthy()
        for segs in self.segments:
            for seg in segs:
                yield seg, (0, seg.rows)

    def _spans(
        self,
        app: str | None,
        user: str | None,
    ) -> Iterator[tuple[LoadedSegment, Range]]:
        if user is not None:
            if app is None:
                raise StoreError("a user id is scoped by its app; pass app as well", field="user")
            return self._user_spans(app, user)
        return self._all_spans() if app is None else self._app_spans(app)

    # -- scoped candidate sets (hybrid retrieval builds on these) ----------
    def user_spans(self, app: str, user: str) -> list[tuple[LoadedSegment, Range]]:
        """The user's row range in each segment of the user's shard; nothing else is read."""
        return list(self._user_spans(app, user))

    def app_spans(self, app: str) -> list[tuple[LoadedSegment, Range]]:
        """The app's row range in every segment that holds it."""
        return list(self._app_spans(app))

    def all_spans(self) -> list[tuple[LoadedSegment, Range]]:
        """Every row of every segment (store-wide: refuses while a shard is damaged)."""
        return list(self._all_spans())

    def forgotten(self, seg: LoadedSegment) -> np.ndarray | None:
        """Boolean mask of ``seg``'s rows hidden by tombstones here (None: no row is)."""
        return self._dead[id(seg)]

    # -- reads -------------------------------------------------------------
    def count(
        self, app: str | None = None, user: str | None = None, now: float | None = None
    ) -> int:
        now = time.time() if now is None else now
        total = 0
        for seg, span in self._spans(app, user):
            keep = self._keep(seg, span, now)
            total += span[1] - span[0] if keep is None else int(keep.sum())
        return total

    def rows_for_user(self, app: str, user: str, now: float | None = None) -> list[Memory]:
        """The user's live memories, oldest first."""
        now = time.time() if now is None else now
        out: list[Memory] = []
        for seg, span in self._user_spans(app, user):
            out.extend(rows_to_memories(seg.table, self._live_rows(seg, span, now), seg.vectors))
        out.sort(key=lambda m: (m.created_at, m.memory_id))
        return out

    def iter_memories(
        self, app: str | None = None, user: str | None = None, batch: int = 2048
    ) -> Iterator[Memory]:
        """Every live memory (of an app, or of one user), segment by segment."""
        now = time.time()
        for seg, span in self._spans(app, user):
            rows = self._live_rows(seg, span, now)
            for i in range(0, len(rows), batch):
                yield from rows_to_memories(seg.table, rows[i : i + batch], seg.vectors)

    def tenants(self) -> list[tuple[str, str]]:
        """Every (app, user) with stored rows (live or not), sorted."""
        self.check_healthy()
        return sorted({t for segs in self.segments for seg in segs for t in seg.ranges})

    def get(self, memory_id: str, owner: tuple[str, str] | None = None) -> Memory | None:
        """The live memory ``memory_id``; with ``owner`` (app, user), only among that
        user's rows (ids are unique per owner, not across the store)."""
        now = time.time()
        key = pa.scalar(memory_id, pa.string())
        spans = self.user_spans(*owner) if owner is not None else list(self._all_spans())
        for seg, (start, end) in spans:
            row = pc.index(seg.table["memory_id"].slice(start, end - start), key).as_py()
            if row >= 0:
                row += start
                keep = self._keep(seg, (row, row + 1), now)
                if keep is not None and not keep[0]:
                    return None
                return rows_to_memories(seg.table, [row], seg.vectors)[0]
        return None

    # -- vector search -----------------------------------------------------
    def _query(self, query_vec: np.ndarray) -> np.ndarray:
        if self.manifest.embedding_model is None or self.manifest.keyword_only:
            raise StoreError("search: this store has no embeddings (keyword-only or empty)")
        q = np.asarray(query_vec, dtype=np.float32)
        if q.shape != (self.manifest.dim,):
            raise StoreError(
                f"expected shape ({self.manifest.dim},), got {q.shape}", field="query_vec"
            )
        return q

    def _hits(self, found: list[tuple[float, LoadedSegment, int]], k: int) -> list[Hit]:
        found = sorted(found, key=lambda f: -f[0])[:k]
        by_seg: dict[int, list[int]] = {}
        for _, seg, row in found:
            by_seg.setdefault(id(seg), []).append(row)
        # One Arrow take per segment: per-row takes dominate a sub-ms search.
        memories: dict[tuple[int, int], Memory] = {}
        for _, seg, _ in found:
            if id(seg) in by_seg:
                rows = by_seg.pop(id(seg))
                memories.update(
                    ((id(seg), r), m)
                    for r, m in zip(
                        rows, rows_to_memories(seg.table, rows, seg.vectors), strict=True
                    )
                )
        return [Hit(memories[(id(seg), row)], score) for score, seg, row in found]

    def search_user(
        self, app: str, user: str, query_vec: np.ndarray, k: int = 10, mask_fn: MaskFn | None = None
    ) -> list[Hit]:
        """Exact top-k over one user's live memories."""
        if self.manifest.embedding_model is None:
            return []
        q = self._query(query_vec)
        now = time.time()
        found: list[tuple[float, LoadedSegment, int]] = []
        for seg, span in self._user_spans(app, user):
            assert seg.vectors is not None  # an embedding store always has vectors
            scores, ids = search_range(
                seg.vectors, q, span[0], span[1], k, self._keep(seg, span, now, mask_fn)
            )
            found.extend(
                (float(s), seg, int(i)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0
            )
        return self._hits(found, k)

    def search_app(
        self,
        app: str,
        query_vec: np.ndarray,
        k: int = 10,
        mask_fn: MaskFn | None = None,
        *,
        filters: RowFilter | None = None,
    ) -> list[Hit]:
        """Top-k over one app's live memories: ANN on big segments, exact on small ones.

        ``filters``: recall filters applied inside the search, like ``mask_fn`` (both
        given: a row must pass both). The backend-neutral form (a LanceDB view turns it
        into its where-clause); ``mask_fn`` is for this snapshot's own callers."""
        if self.manifest.embedding_model is None:
            return []
        if filters is not None and not filters.empty:
            mask_fn = filters.mask_table if mask_fn is None else _both(mask_fn, filters.mask_table)
        # Other agents' agent-only rows never fill the top-k (scopes: always, not a filter).
        agent = getattr(filters, "agent_name", None)
        q = self._query(query_vec)
        now = time.time()
        found: list[tuple[float, LoadedSegment, int]] = []
        for seg, span in self._app_spans(app):
            assert seg.vectors is not None and seg.index is not None
            start, end = span
            keep = self._keep(seg, span, now, mask_fn)
            view = agent_rows(seg.table.slice(start, end - start), agent)
            if view is not None:  # None: no agent-only rows here, the search stays unmasked
                keep = view if keep is None else keep & view
            if seg.entry.index == "flat" or end - start < self.exact_max_rows:
                # The app's rows are one contiguous slice: exact is as cheap as ANN here.
                scores, ids = search_range(seg.vectors, q, start, end, k, keep)
            else:
                allowed = None
                if keep is not None or (start, end) != (0, seg.rows):
                    allowed = np.zeros(seg.rows, dtype=bool)
                    allowed[start:end] = True if keep is None else keep
                scores, ids = search_ann(seg.index, q, k, allowed)
            found.extend(
                (float(s), seg, int(i)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0
            )
        return self._hits(found, k)
