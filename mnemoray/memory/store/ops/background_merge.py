"""The merge a server runs by itself: online writes leave one small segment per commit
and shard touched; once a shard holds ``after_segments`` segments under ``small_rows``
rows, a background thread merges them (:func:`~mnemoray.memory.store.ops.merge.
compact_store`, the merge of ``mnemoray compact``, limited to those small segments).

Recall never waits for it: readers keep the manifest they loaded until the merge's one
rename publishes the merged segment. Writers wait for the store lock while the merge
holds it, which stays short because only small segments are rewritten; a segment that
grows past ``small_rows`` is left alone from then on, so the work per merge is bounded
and a shard's count stays near ``after_segments`` plus its large segments.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mnemoray.errors import ConfigError
from mnemoray.memory.store.manifest import Manifest
from mnemoray.memory.store.ops.merge import CompactReport, compact_store
from mnemoray.memory.store.parquet.store import MemoryStore

log = logging.getLogger(__name__)

DEFAULT_AFTER_SEGMENTS = 16
DEFAULT_SMALL_ROWS = 4096


def small_segments(m: Manifest, small_rows: int) -> list[int]:
    """Per shard, how many of its segments have fewer than ``small_rows`` rows."""
    return [sum(e.rows < small_rows for e in entries) for entries in m.segments]


class BackgroundMerge:
    """One daemon thread merging ``store``'s small segments when :meth:`poke` finds a
    shard past ``after_segments`` of them. ``on_merged``: called with each report that
    changed the store (a server refreshes its snapshot there). Call :meth:`stop`."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        after_segments: int = DEFAULT_AFTER_SEGMENTS,
        small_rows: int = DEFAULT_SMALL_ROWS,
        on_merged: Callable[[CompactReport], object] | None = None,
    ) -> None:
        if after_segments < 2:
            raise ConfigError(f"must be at least 2, got {after_segments}", field="after_segments")
        if small_rows < 1:
            raise ConfigError(f"must be positive, got {small_rows}", field="small_rows")
        self.store = store
        self.after_segments = after_segments
        self.small_rows = small_rows
        self._on_merged = on_merged
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self.merges = 0  # merges that changed the store
        self.failures = 0
        self._thread = threading.Thread(target=self._loop, name="mnemoray-merge", daemon=True)
        self._thread.start()

    def due(self) -> bool:
        """Whether some shard holds ``after_segments`` small segments now."""
        counts = small_segments(self.store.manifest(), self.small_rows)
        return any(n >= self.after_segments for n in counts)

    def poke(self) -> None:
        """A write committed: check (on the merge thread) whether a merge is due."""
        self._wake.set()

    def merge_now(self) -> CompactReport | None:
        """Merge now if due, on the caller's thread; the report, None when not due."""
        if not self.due():
            return None
        report = compact_store(self.store, max_segment_rows=self.small_rows)
        if report.changed:
            self.merges += 1
            if self._on_merged is not None:
                self._on_merged(report)
        return report

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            if self._stopping.is_set():
                return
            self._wake.clear()
            try:
                self.merge_now()
            except Exception:  # a failed merge changes nothing; the next poke retries
                self.failures += 1
                log.exception("background merge of %s failed", self.store.root)

    def stop(self, timeout: float | None = 10.0) -> None:
        """Let a running merge finish (it is one rename from done or undone), then end."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout)
