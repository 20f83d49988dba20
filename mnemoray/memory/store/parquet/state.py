"""The Parquet + FAISS store's directory and its committed state: the lock, the manifest,
the snapshots loaded from it (unchanged segments reused across versions, a damaged shard
refused on its own) and the lookups of committed rows. One :class:`StoreState` per
:class:`~mnemoray.memory.store.parquet.store.MemoryStore`, shared by each of its parts
(writes, pending rewrites, forgets, gc), which take it in their constructor."""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from mnemoray.errors import StoreCorrupt, StoreError
from mnemoray.files import file_lock
from mnemoray.memory.store.graph.view import GraphCache, GraphView
from mnemoray.memory.store.layout import LOCK, TOMBSTONES_DIR, repair_hint
from mnemoray.memory.store.manifest import (
    Manifest,
    SegmentEntry,
    load_manifest,
    read_manifest,
    write_manifest,
)
from mnemoray.memory.store.parquet.lookup import StoredLookup
from mnemoray.memory.store.segment import LoadedSegment
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.tombstones import read_tombstones
from mnemoray.memory.store.writes import OwnedId

# The store's log keeps the name it had before the store was split into modules.
log = logging.getLogger("mnemoray.memory.store.parquet.store")

DEFAULT_SHARDS = 8
# Bytes of just-committed segments kept for the next snapshot (online commits are small;
# a large write that no snapshot follows must not hold its rows for good).
WRITTEN_BYTES = 64 << 20


def _weight(seg: LoadedSegment) -> int:
    return seg.table.nbytes + (seg.vectors.nbytes if seg.vectors is not None else 0)


class StoreState:
    """A store directory's committed state (``MemoryStore`` documents the arguments)."""

    def __init__(
        self,
        root: str | Path,
        shards: int | None = None,
        *,
        load_shards: Iterable[int] | None = None,
    ) -> None:
        self.root = Path(root)
        if shards is not None and (not isinstance(shards, int) or shards < 1):
            raise StoreError(f"must be a positive integer, got {shards!r}", field="shards")
        self.load_shards: frozenset[int] | None = None
        if load_shards is not None:
            picked = list(load_shards)
            if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in picked):
                raise StoreError(
                    f"expected shard numbers >= 0, got {picked!r}", field="load_shards"
                )
            self.load_shards = frozenset(picked)
        existing = read_manifest(self.root)
        if existing is not None and shards is not None and shards != existing.shards:
            # No path in the message: a server may answer it to a client.
            raise StoreError(
                f"the store has {existing.shards} shards, got {shards}", field="shards"
            )
        self.shards = existing.shards if existing else (shards or DEFAULT_SHARDS)
        self._segments: dict[tuple[int, str], LoadedSegment] = {}
        # Segments this process wrote and committed, not yet in a snapshot: the next
        # snapshot takes them as they are instead of reading their files back. Its own
        # lock: a write never waits for a snapshot being loaded.
        self._written: OrderedDict[tuple[int, str], LoadedSegment] = OrderedDict()
        self._written_bytes = 0
        self._written_lock = threading.Lock()
        self._snap: StoreSnapshot | None = None
        self._load_lock = threading.Lock()
        self._graph_cache = GraphCache()  # graph shards, shared across snapshots
        # The write path's lookups: columns kept per committed file, or the snapshot's.
        self.lookup = StoredLookup(self.root, lambda shard, name: self._segments.get((shard, name)))

    # -- manifest & snapshots ---------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[None]:
        """The store's write lock (a file lock: other processes' writers wait too)."""
        with file_lock(self.root / LOCK):
            yield

    def manifest(self) -> Manifest:
        """The committed manifest (version 0 and empty before the first commit)."""
        return read_manifest(self.root) or Manifest(shards=self.shards)

    def load(self) -> StoreSnapshot:
        """A snapshot of the committed state; unchanged segments are reused across versions."""
        return self.snapshot(self.manifest())

    def snapshot(self, m: Manifest) -> StoreSnapshot:
        """A snapshot of ``m`` (the last one when ``m`` is its version)."""
        with self._load_lock:
            snap = self._snap
            if (
                snap is not None
                and not snap.damaged
                and (snap.version, snap.manifest.updated_at) == (m.version, m.updated_at)
            ):
                return snap
            live: dict[tuple[int, str], LoadedSegment] = {}
            damaged: dict[int, str] = {}
            wanted = self.load_shards
            for shard, entries in enumerate(m.segments):
                if wanted is not None and shard not in wanted:
                    continue
                try:
                    loaded = [
                        self._kept(shard, e)
                        or self._take_written(shard, e)
                        or LoadedSegment.load(self.root, shard, e, m.dim or 0)
                        for e in entries
                    ]
                except StoreCorrupt as exc:
                    # One damaged shard must not take the others down: its reads refuse.
                    damaged[shard] = (
                        f"{exc} (shard {shard} is not served until repaired); "
                        f"{repair_hint(self.root)}"
                    )
                    log.error("memory store %s: shard %d not loaded: %s", self.root, shard, exc)
                    continue
                live.update(((shard, seg.name), seg) for seg in loaded)
            self._segments = live  # segments gone from the manifest are released
            self._forget_written(m.version)
            tombstones = read_tombstones(self.root / TOMBSTONES_DIR / n for n in m.tombstones)
            segments = [
                [live[(s, e.name)] for e in entries]
                if (wanted is None or s in wanted) and s not in damaged
                else []
                for s, entries in enumerate(m.segments)
            ]
            # A private copy: callers go on to mutate their manifest for the next commit.
            mine = copy.deepcopy(m)
            graph = GraphView(self.root, mine, self._graph_cache)
            graph.preload(s for s in range(m.shards) if wanted is None or s in wanted)
            self._snap = StoreSnapshot(mine, segments, tombstones, damaged, graph=graph)
            return self._snap

    def remember_written(self, segments: Iterable[LoadedSegment], version: int) -> None:
        """Segments this process just committed at manifest ``version``, for the next
        snapshot to take as they are. Bounded by ``WRITTEN_BYTES``: the oldest are
        forgotten (a snapshot then reads their files)."""
        with self._written_lock:
            for seg in segments:
                seg = replace(seg, entry=replace(seg.entry, version=version))
                key = (seg.shard, seg.name)
                if key in self._segments or key in self._written:
                    continue  # a snapshot loaded it already
                self._written[key] = seg
                self._written_bytes += _weight(seg)
            while self._written and self._written_bytes > WRITTEN_BYTES:
                _, old = self._written.popitem(last=False)
                self._written_bytes -= _weight(old)

    def in_memory_segment(self, shard: int, name: str) -> LoadedSegment | None:
        """A segment this process holds (loaded, or just committed), else None."""
        with self._written_lock:
            seg = self._written.get((shard, name))
        return seg or self._segments.get((shard, name))

    def _take_written(self, shard: int, entry: SegmentEntry) -> LoadedSegment | None:
        with self._written_lock:
            seg = self._written.pop((shard, entry.name), None)
            if seg is not None:
                self._written_bytes -= _weight(seg)
        return seg if seg is not None and seg.entry == entry else None

    def _forget_written(self, version: int) -> None:
        """Drop what a snapshot of ``version`` did not take: committed at or before it and
        not listed there, the segment was replaced (a merge) or lies in a shard not loaded."""
        with self._written_lock:
            for key in [k for k, seg in self._written.items() if seg.entry.version <= version]:
                self._written_bytes -= _weight(self._written.pop(key))

    def _kept(self, shard: int, entry: SegmentEntry) -> LoadedSegment | None:
        """The loaded segment of ``entry`` if it is still the one listed (``doctor
        --repair`` may renumber versions, and tombstones apply by version)."""
        seg = self._segments.get((shard, entry.name))
        return seg if seg is not None and seg.entry == entry else None

    def check_shard_files(self, m: Manifest, shard: int) -> None:
        """Refuse to write to a shard whose listed files are gone (a stat per segment):
        it cannot be served until ``doctor --repair``, and a write would hide that."""
        for e in m.segments[shard]:
            for path in e.files(self.root, shard):
                if not path.is_file():
                    raise StoreCorrupt(
                        f"shard {shard}: {path} listed in the manifest is "
                        f"missing; {repair_hint(self.root)}"
                    )

    def publish_empty_manifest(self, lock_held: bool) -> None:
        """Version 0 before a new store's first data file: data without a manifest then
        always means a lost one (``read_manifest`` refuses it), not a crashed first run."""
        if lock_held:
            if load_manifest(self.root) is None:
                write_manifest(self.root, Manifest(shards=self.shards))
            return
        with self.locked():
            self.publish_empty_manifest(True)

    def graph_read(self, m: Manifest, shard: int) -> dict[str, pa.Table]:
        """A shard's graph rows at ``m``, from the tables snapshots loaded when unchanged."""
        return self._graph_cache.shard(self.root, m, shard)

    def stored(
        self,
        m: Manifest,
        shard: int,
        hashes: Sequence[str] | pa.ChunkedArray,
        ids: Sequence[str] | pa.ChunkedArray,
        after_version: int = 0,
    ) -> dict[OwnedId, str]:
        """(app, user, memory_id) -> content_hash of the rows of ``shard``'s segments
        committed after ``after_version`` matching either list (``StoredLookup``)."""
        return self.lookup.stored(
            shard, [e for e in m.segments[shard] if e.version > after_version], hashes, ids
        )
