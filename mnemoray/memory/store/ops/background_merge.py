"""The merge a server runs by itself: online writes leave one small segment per commit
and shard touched; once a shard holds ``after_segments`` segments under ``small_rows``
rows, a background thread merges that shard's small segments
(:func:`~mnemoray.memory.store.ops.merge.compact_store`, the merge of ``mnemoray
compact``, limited to the due shards and leaving the ledger as it is).

Recall never waits for it: readers keep the manifest they loaded until the merge's one
rename publishes the merged segment. Writers never wait for the reading, merging and
writing of those small segments either: the merge takes the store lock only to publish
(``compact_store(hold_lock=False)``; a shard a forget committed meanwhile touches is
dropped from that merge, and the next commit's poke tries again; after ``MAX_DROPPED``
such merges in a row, one holds the lock throughout). Of a shard's small segments it
merges one size tier (``tier_to_merge``: rows within ``TIER_FACTOR`` of each other), so
a growing segment is not rewritten at every merge; one that grows past ``small_rows``
is left alone from then on.

The replaced files are deleted ``grace_s`` after the merge, not at once: another
process (a replica, a backfill) may have read the previous manifest and still be
opening them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

from mnemoray.errors import ConfigError
from mnemoray.memory.store.layout import faiss_path, parquet_path
from mnemoray.memory.store.manifest import Manifest, SegmentEntry
from mnemoray.memory.store.ops.merge import CompactReport, compact_store
from mnemoray.memory.store.ops.merge_policy import (
    DEFAULT_AFTER_SEGMENTS,
    DEFAULT_GRACE_S,
    DEFAULT_SMALL_ROWS,
)
from mnemoray.memory.store.parquet.store import MemoryStore

log = logging.getLogger(__name__)


#: Due merges in a row dropped by what changed meanwhile, after which one holds the lock.
MAX_DROPPED = 3
#: Segments whose rows are within this factor of each other are one size tier.
TIER_FACTOR = 4


def size_tier(rows: int) -> int:
    return int(math.log(max(rows, 1), TIER_FACTOR))


def tier_to_merge(small: list[SegmentEntry]) -> list[SegmentEntry]:
    """Of a shard's small segments, the size tier holding the most (the smaller on a tie):
    those are merged, so a row is rewritten about once per tier it climbs instead of at
    every merge until its segment stops being small. The two smallest when no tier holds
    two."""
    tiers: dict[int, list[SegmentEntry]] = {}
    for e in small:
        tiers.setdefault(size_tier(e.rows), []).append(e)
    if not tiers:
        return []
    most = max(len(t) for t in tiers.values())
    if most < 2:
        smallest = sorted(small, key=lambda e: e.rows)[:2]
        return [e for e in small if e in smallest]
    return tiers[min(k for k, t in tiers.items() if len(t) == most)]


def small_segments(m: Manifest, small_rows: int) -> list[int]:
    """Per shard, how many of its segments have fewer than ``small_rows`` rows."""
    return [sum(e.rows < small_rows for e in entries) for entries in m.segments]


class BackgroundMerge:
    """One daemon thread merging ``store``'s small segments when :meth:`poke` finds a
    shard past ``after_segments`` of them. Call :meth:`stop`. Not for a store that
    loads some shards only (an ``Index`` deployment's): the merge is the whole store's."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        after_segments: int = DEFAULT_AFTER_SEGMENTS,
        small_rows: int = DEFAULT_SMALL_ROWS,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        if after_segments < 2:
            raise ConfigError(f"must be at least 2, got {after_segments}", field="after_segments")
        if small_rows < 1:
            raise ConfigError(f"must be positive, got {small_rows}", field="small_rows")
        if store.load_shards is not None:
            raise ConfigError(
                "a store that loads some shards only cannot merge the whole store",
                field="load_shards",
            )
        self.store = store
        self.after_segments = after_segments
        self.small_rows = small_rows
        self.grace_s = grace_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._replaced: list[tuple[float, list[Path]]] = []  # (delete after, files)
        self._failing = False  # the last merge failed: log the next failure briefly
        self._dropped = 0  # due merges in a row that published nothing (dropped meanwhile)
        self.merges = 0  # merges that changed the store
        self.failures = 0
        self._thread = threading.Thread(target=self._loop, name="mnemoray-merge", daemon=True)
        self._thread.start()

    def due_shards(self) -> list[int]:
        """The shards holding ``after_segments`` small segments now."""
        counts = small_segments(self.store.manifest(), self.small_rows)
        return [s for s, n in enumerate(counts) if n >= self.after_segments]

    def due(self) -> bool:
        return bool(self.due_shards())

    def poke(self) -> None:
        """A write committed: check (on the merge thread) whether a merge is due."""
        self._wake.set()

    def merge_now(self) -> CompactReport | None:
        """Merge the due shards now, on the caller's thread; the report, None when none
        is due. The replaced files are deleted ``grace_s`` later (:meth:`delete_due`)."""
        shards = self.due_shards()
        if not shards:
            return None
        report = compact_store(
            self.store,
            max_segment_rows=self.small_rows,
            delete_old=False,
            only_shards=shards,
            merge_ledger=False,
            # Forgets that keep landing on a shard mid-merge would drop it every time.
            hold_lock=self._dropped >= MAX_DROPPED,
            pick=tier_to_merge,
        )
        self._dropped = 0 if report.changed else self._dropped + 1
        if report.changed:
            self.merges += 1
            root = self.store.root
            files = [
                path
                for sc in report.shards
                for name in sc.merged
                for path in (parquet_path(root, sc.shard, name), faiss_path(root, sc.shard, name))
            ]
            self._replaced.append((time.monotonic() + self.grace_s, files))
        return report

    def delete_due(self, now: float | None = None) -> int:
        """Delete the replaced files whose grace is over; how many were deleted."""
        now = time.monotonic() if now is None else now
        deleted = 0
        while self._replaced and self._replaced[0][0] <= now:
            _, files = self._replaced.pop(0)
            for path in files:
                if path.exists():
                    path.unlink(missing_ok=True)
                    deleted += 1
        return deleted

    def _loop(self) -> None:
        while True:
            timeout = max(self._replaced[0][0] - time.monotonic(), 0.0) if self._replaced else None
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.delete_due()
                report = self.merge_now()
                if report is not None and report.changed and self.due():
                    self._wake.set()  # one tier merged, the shard still due: go on
                self._failing = False
            except Exception as exc:  # a failed merge changes nothing; the next poke retries
                self.failures += 1
                if self._failing:  # once in full, then one line per failure
                    log.warning("background merge of %s failed again: %s", self.store.root, exc)
                else:
                    log.exception("background merge of %s failed", self.store.root)
                self._failing = True

    def stop(self, timeout: float | None = 10.0) -> None:
        """Let a running merge finish (it is one rename from done or undone), then end.
        Replaced files still in their grace are left for ``mnemoray gc``."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("background merge of %s still running after %s s", self.store.root, timeout)
