"""The entity graph of one committed store version, as a snapshot exposes it.

``GraphView`` holds the graph tables of the snapshot's shards in memory, read when the
snapshot is built (like its segments): tables of a shard whose parts did not change
are shared with the next snapshot (``GraphCache``, held by the store), so a Serve
replica reads a shard's graph once per change, never per request, and a snapshot
never needs a file a later commit may remove. Users' ``UserGraph`` records and
traversal indexes are built from those tables once per snapshot and kept (a few
recent ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.errors import StoreCorrupt
from mnemoray.graph import GraphIndex, UserGraph
from mnemoray.memory.store.graph.parts import empty_tables, read_part, resolve_parts
from mnemoray.memory.store.graph.tables import (
    SCHEMAS,
    TABLES,
    graph_from_tables,
    index_from_relations,
)
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.manifest import Manifest

Tables = dict[str, pa.Table]
T = TypeVar("T")
KEEP_BUILT = 64  # users' graphs / indexes kept per snapshot


class GraphCache:
    """A store's loaded graph shards, keyed by the parts they were read from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shards: dict[int, tuple[tuple[str, ...], Tables]] = {}

    def shard(self, root: Path, m: Manifest, shard: int) -> Tables:
        names = tuple(p.name for p in m.graph[shard])
        with self._lock:
            found = self._shards.get(shard)
            if found is not None and found[0] == names:
                return found[1]
        tables = resolve_parts(read_part(root, shard, p) for p in m.graph[shard])[0]
        with self._lock:
            self._shards[shard] = (names, tables)
        return tables


class GraphView:
    """The graph tables of one manifest version (read lazily per shard, then kept)."""

    def __init__(self, root: Path, manifest: Manifest, cache: GraphCache | None = None) -> None:
        self.root, self.manifest = root, manifest
        self._cache = cache or GraphCache()
        self._lock = threading.Lock()
        self._built: OrderedDict[tuple[str, str, str | None], object] = OrderedDict()
        self._tables: dict[int, Tables] = {}
        self._damaged: dict[int, StoreCorrupt] = {}

    def preload(self, shards: Iterable[int]) -> None:
        """Read the graph of ``shards`` now (those with parts). A shard whose parts
        cannot be read is damaged: its graph reads raise, the others are served."""
        for shard in shards:
            if self.manifest.graph[shard]:
                try:
                    self._tables[shard] = self._cache.shard(self.root, self.manifest, shard)
                except StoreCorrupt as exc:
                    self._damaged[shard] = exc

    def shard_tables(self, shard: int) -> Tables:
        if shard in self._damaged:
            raise self._damaged[shard]
        found = self._tables.get(shard)
        if found is not None:
            return found
        if not self.manifest.graph[shard]:
            return empty_tables()
        return self._cache.shard(self.root, self.manifest, shard)  # a shard not preloaded

    def _user_tables(self, app: str, user: str) -> Tables:
        return self.shard_tables(shard_of(app, user, self.manifest.shards))

    def _memo(self, key: tuple[str, str, str | None], build: Callable[[], T]) -> T:
        with self._lock:
            if key in self._built:
                self._built.move_to_end(key)
                return self._built[key]  # type: ignore[return-value]
        value = build()
        with self._lock:
            self._built[key] = value
            while len(self._built) > KEEP_BUILT:
                self._built.popitem(last=False)
        return value

    def user(self, app: str, user: str) -> UserGraph:
        """One user's entities, aliases and relations (empty when none were written)."""
        if not self.manifest.graph[shard_of(app, user, self.manifest.shards)]:
            return UserGraph(app, user)  # no graph in the shard: nothing to read or keep
        return self._memo(
            ("graph", app, user), lambda: graph_from_tables(app, user, self._user_tables(app, user))
        )

    def index(self, app: str, user: str | None = None) -> GraphIndex:
        """The traversal index of one user, or (``user`` None) of every user of the app."""

        def build() -> GraphIndex:
            if user is not None:
                t = self._user_tables(app, user)["relations"]
                mask = pc.and_(pc.equal(t["app_name"], app), pc.equal(t["user_id"], user))
                return index_from_relations(t.filter(mask))
            parts = []
            for shard in range(self.manifest.shards):
                if self.manifest.graph[shard]:
                    t = self.shard_tables(shard)["relations"]
                    parts.append(t.filter(pc.equal(t["app_name"], app)))
            return index_from_relations(
                pa.concat_tables(parts) if parts else SCHEMAS["relations"].empty_table()
            )

        return self._memo(("index", app, user), build)

    def users(self, app: str) -> list[str]:
        """The users of ``app`` with graph rows, sorted."""
        found: set[str] = set()
        for shard in range(self.manifest.shards):
            if self.manifest.graph[shard]:
                t = self.shard_tables(shard)["entities"]
                found.update(t.filter(pc.equal(t["app_name"], app))["user_id"].to_pylist())
        return sorted(found)

    def counts(self) -> dict[str, int]:
        """Rows per table over the whole store (``stats``)."""
        out = dict.fromkeys(TABLES, 0)
        for shard in range(self.manifest.shards):
            if self.manifest.graph[shard]:
                for t, table in self.shard_tables(shard).items():
                    out[t] += table.num_rows
        return out


__all__ = ["GraphCache", "GraphView"]
