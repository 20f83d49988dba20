"""LanceView: a read view of one committed version of a LanceDB store.

It answers the same reads as a Parquet :class:`StoreSnapshot` (the
:class:`~mnemoray.memory.store.protocol.MemoryView` protocol), so the Retriever, superseding
and the service run unchanged on it:

- a user's (or an app's) rows are read from LanceDB with a where-filter on
  ``app_name``/``user_id`` and handed out as one in-memory segment (Arrow rows + their
  vectors); the Retriever then ranks them exactly, with the same function, so scores
  match the Parquet backend. Each scope is read once per view (bounded cache);
- app-wide vector recall is LanceDB's own vector search, the where-clause holding
  the app, the TTL and the recall filters (applied before the top-k, not after);
- counts and single gets are LanceDB queries; nothing else is loaded.

The tables are checked out at the versions current when the view was opened, so a
view never changes under a reader. Forgets delete rows for real: no row is ever
masked, and ``tombstones`` are the forget records (reason, actor) of the ``forgets`` table.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from mnemoray.errors import StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.index import search_range
from mnemoray.memory.store.lance.tables import (
    COMMITTED_IN,
    Head,
    agent_where,
    both,
    filters_where,
    live_where,
    owner_where,
    split_vectors,
    sql_str,
    tombstone_of,
)
from mnemoray.memory.store.manifest import SegmentEntry
from mnemoray.memory.store.rows import EMBEDDING, rows_to_memories
from mnemoray.memory.store.scopes import agent_rows
from mnemoray.memory.store.segment import LoadedSegment, Range, tenant_ranges
from mnemoray.memory.store.snapshot import Hit, MaskFn, StoreSnapshot
from mnemoray.memory.store.tombstones import Tombstone

if TYPE_CHECKING:
    from lancedb.table import Table

    from mnemoray.memory.records.filters import RecallFilters

SORT = [
    ("app_name", "ascending"),
    ("user_id", "ascending"),
    ("created_at", "ascending"),
    ("memory_id", "ascending"),
]
SCOPE_CACHE = 256  # scopes (users, apps) whose rows one view keeps


def read_rows(table: Table, where: str | None, columns: list[str] | None = None) -> pa.Table:
    """Every row of ``table`` passing ``where`` (None: all), only ``columns`` if given."""
    query = table.search()
    if where:
        query = query.where(where)
    if columns is not None:
        query = query.select(columns)
    return query.limit(None).to_arrow()


class LanceView(StoreSnapshot):
    """One committed version of a :class:`~mnemoray.memory.store.lance.LanceStore`.

    A StoreSnapshot for every reader; only the parts that read rows are LanceDB's
    (``StoreSnapshot.__init__`` is not called: there are no segment files to load).
    """

    def __init__(
        self,
        head: Head,
        memories: Table | None,
        forgets: Table | None,
        key: tuple[int, int] = (0, 0),
    ) -> None:
        self.head = head
        self.key = key  # (memories, forgets) table versions it reads
        self.manifest = head.manifest()
        self.segments: list[list[LoadedSegment]] = [[]]  # no segment files
        self.damaged: dict[int, str] = {}
        self._dead: dict[int, np.ndarray | None] = defaultdict(lambda: None)  # nothing masked
        self._memories = memories
        self._forgets = forgets
        # Names the rows' content in the Retriever's cache keys (one table version).
        self._tag = f"lance{memories.version if memories is not None else 0}"
        self._scopes: OrderedDict[tuple[str, ...], list[tuple[LoadedSegment, Range]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self._tombstones: list[Tombstone] | None = None

    @property
    def tombstones(self) -> list[Tombstone]:  # type: ignore[override]
        """Forget records (reason, actor), oldest first; read on first use."""
        if self._tombstones is None:
            rows = [] if self._forgets is None else read_rows(self._forgets, None).to_pylist()
            self._tombstones = sorted(
                (tombstone_of(r) for r in rows), key=lambda t: (t.version, t.at)
            )
        return self._tombstones

    def forgotten(self, seg: LoadedSegment) -> np.ndarray | None:
        return None  # forgets delete rows: nothing is left to mask

    # -- scopes as in-memory segments ----------------------------------------------
    def _segment(self, rows: pa.Table, name: str) -> LoadedSegment:
        rows, vectors = split_vectors(
            rows.drop_columns([COMMITTED_IN]).sort_by(SORT), self.manifest.dim or 0
        )
        ranges, app_ranges = tenant_ranges(rows)
        expires = rows["expires_at"].to_numpy(zero_copy_only=False).astype(np.float64)
        finite = expires[~np.isnan(expires)]
        entry = SegmentEntry(name=name, rows=rows.num_rows, version=self.version, index=None)
        return LoadedSegment(
            shard=0,
            entry=entry,
            table=rows,
            vectors=vectors,
            index=None,
            ranges=ranges,
            app_ranges=app_ranges,
            expires=expires,
            min_expiry=float(finite.min()) if len(finite) else math.inf,
        )

    def _scope(
        self,
        key: tuple[str, ...],
        where: str | None,
    ) -> list[tuple[LoadedSegment, Range]]:
        with self._lock:
            hit = self._scopes.get(key)
            if hit is not None:
                self._scopes.move_to_end(key)
                return hit
        spans: list[tuple[LoadedSegment, Range]] = []
        if self._memories is not None:
            rows = read_rows(self._memories, where)
            if rows.num_rows:
                seg = self._segment(rows, f"{self._tag}:{'/'.join(key)}")
                spans = [(seg, (0, seg.rows))]
        with self._lock:
            self._scopes[key] = spans
            while len(self._scopes) > SCOPE_CACHE:
                self._scopes.popitem(last=False)
        return spans

    def _user_spans(self, app: str, user: str) -> Iterator[tuple[LoadedSegment, Range]]:
        return iter(self._scope(("user", app, user), owner_where(app, user)))

    def _app_spans(self, app: str) -> Iterator[tuple[LoadedSegment, Range]]:
        return iter(self._scope(("app", app), owner_where(app)))

    def _all_spans(self) -> Iterator[tuple[LoadedSegment, Range]]:
        return iter(self._scope(("all",), None))

    # -- reads answered by LanceDB queries -----------------------------------------
    def count(
        self, app: str | None = None, user: str | None = None, now: float | None = None
    ) -> int:
        if user is not None and app is None:
            raise StoreError("a user id is scoped by its app; pass app as well", field="user")
        if self._memories is None:
            return 0
        now = time.time() if now is None else now
        owner = None if app is None else owner_where(app, user)
        return int(self._memories.count_rows(both(owner, live_where(now))))

    def tenants(self) -> list[tuple[str, str]]:
        if self._memories is None:
            return []
        rows = read_rows(self._memories, None, ["app_name", "user_id"])
        return sorted(
            set(zip(rows["app_name"].to_pylist(), rows["user_id"].to_pylist(), strict=True))
        )

    def get(self, memory_id: str, owner: tuple[str, str] | None = None) -> Memory | None:
        if self._memories is None:
            return None
        where = both(
            f"memory_id = {sql_str(memory_id)}",
            None if owner is None else owner_where(*owner),
            live_where(time.time()),
        )
        rows = read_rows(self._memories, where)
        if not rows.num_rows:
            return None
        table, vectors = split_vectors(rows.drop_columns([COMMITTED_IN]), self.manifest.dim or 0)
        return rows_to_memories(table, [0], vectors)[0]

    # Lance reads RecallFilters' fields (its where-clauses), more than a RowFilter has.
    def search_app(  # type: ignore[override]
        self,
        app: str,
        query_vec: np.ndarray,
        k: int = 10,
        mask_fn: MaskFn | None = None,
        *,
        filters: RecallFilters | None = None,
    ) -> list[Hit]:
        """Top-k of one app's live memories by LanceDB vector search (the app, the TTL and
        ``filters`` in its where-clause, applied before the top-k). A ``mask_fn`` (a
        Python predicate LanceDB cannot run) is answered exactly over the app's rows."""
        if self.manifest.embedding_model is None or self._memories is None:
            return []
        q = self._query(query_vec)
        now = time.time()
        if mask_fn is not None:
            agent, given = getattr(filters, "agent_name", None), mask_fn

            def with_view(t: pa.Table) -> np.ndarray:
                keep, view = np.asarray(given(t), bool), agent_rows(t, agent)
                return keep if view is None else keep & view

            return self._search_masked(app, q, k, with_view, filters, now)
        where = both(
            owner_where(app),
            live_where(now),
            agent_where(getattr(filters, "agent_name", None)),
            *(filters_where(filters) if filters is not None else []),
        )
        rows = (
            self._memories.search(q, vector_column_name=EMBEDDING)
            .distance_type("dot")  # type: ignore[attr-defined]  # on the vector query builder
            .where(where, prefilter=True)
            .limit(k)
            .to_arrow()
        )
        table, vectors = split_vectors(
            rows.drop_columns(["_distance", COMMITTED_IN]), self.manifest.dim or 0
        )
        if vectors is None or not len(vectors):
            return []
        # The same float32 inner product the exact user search computes.
        scores = vectors @ q
        order = np.argsort(-scores, kind="stable")
        memories = rows_to_memories(table, order, vectors)
        return [Hit(m, float(scores[i])) for m, i in zip(memories, order, strict=True)]

    def _search_masked(
        self,
        app: str,
        q: np.ndarray,
        k: int,
        mask_fn: MaskFn,
        filters: RecallFilters | None,
        now: float,
    ) -> list[Hit]:
        if filters is not None and not filters.empty:
            extra = mask_fn
            mask_fn = lambda t: np.asarray(extra(t), bool) & filters.mask_table(t)  # noqa: E731
        found: list[tuple[float, Any, int]] = []
        for seg, span in self._app_spans(app):
            assert seg.vectors is not None
            scores, ids = search_range(
                seg.vectors, q, span[0], span[1], k, self._keep(seg, span, now, mask_fn)
            )
            found.extend(
                (float(s), seg, int(i)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0
            )
        return self._hits(found, k)


__all__ = ["LanceView", "read_rows"]
