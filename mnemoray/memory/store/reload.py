"""When a reader sees a new store version: the one reload policy, two schedules.

A :class:`SnapshotReloader` holds the current :class:`StoreSnapshot` and
replaces it when ``manifest.json`` changes (its inode, mtime and size: one
``stat``). Snapshots are immutable and their files memory-mapped (a writer's own
just-committed segments: held as it wrote them), so a reader that started on the old
one finishes on it, even if a segment is deleted meanwhile.

- ``watch_interval_s=None`` (a library or CLI process): every ``current()`` checks
  the manifest, so a commit from any process is visible to the next read.
- ``watch_interval_s=0.25`` (a server): a background thread checks; ``current()``
  is a plain attribute read and never waits for a load. Writers call
  ``refresh()`` right after their commit, so their own writes are visible at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mnemoray.errors import InvalidInput
from mnemoray.memory.store.layout import MANIFEST
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.periodic import Periodic

log = logging.getLogger(__name__)

Stamp = tuple[int, ...] | None


def manifest_stamp(root: Path) -> Stamp:
    try:
        st = os.stat(root / MANIFEST)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class SnapshotReloader:
    """The current snapshot of one store, reloaded when its manifest changes."""

    def __init__(
        self,
        load: Callable[[], StoreSnapshot],
        root: Path,
        *,
        watch_interval_s: float | None = None,
        stamp: Callable[[], Stamp] | None = None,
    ) -> None:
        if watch_interval_s is not None and not watch_interval_s > 0:
            raise InvalidInput(
                f"must be > 0 or None, got {watch_interval_s!r}", field="watch_interval_s"
            )
        self._load = load
        self._root = Path(root)
        # What changes on every commit: the store's own ``stamp`` (a backend whose
        # commit point is not manifest.json passes it), else manifest.json's.
        self._stamp_of = stamp or (lambda: manifest_stamp(self._root))
        self.watch_interval_s = watch_interval_s
        self._snap: StoreSnapshot | None = None
        self._stamp: Stamp = None
        self._lock = threading.Lock()  # one load at a time
        self._watcher: Periodic | None = None
        self.reloads = 0  # swaps after the first load
        self.failures = 0  # failed background reloads (the old snapshot kept serving)
        self.last_load_s = 0.0
        self.last_error: str | None = None

    @property
    def watching(self) -> bool:
        """Reads never reload (the watcher thread or a writer's ``refresh()`` does)."""
        return self.watch_interval_s is not None

    def current(self) -> StoreSnapshot:
        snap = self._snap
        if snap is None or not self.watching:
            self.refresh()
            snap = self._snap
            assert snap is not None
        return snap

    def refresh(self) -> bool:
        """Load and swap if the manifest changed; True if it swapped."""
        if self._snap is not None and self._stamp_of() == self._stamp:
            return False
        with self._lock:
            # Stat first, load second: a commit in between is caught by the next refresh.
            stamp = self._stamp_of()
            if self._snap is not None and stamp == self._stamp:
                return False
            start = time.perf_counter()
            snap = self._load()
            first = self._snap is None
            self._snap, self._stamp = snap, stamp
            self.last_load_s = time.perf_counter() - start
            if not first:
                self.reloads += 1
            log.debug(
                "memory store snapshot: version %d loaded in %.1f ms",
                snap.version,
                self.last_load_s * 1000,
            )
            return True

    def start(self) -> SnapshotReloader:
        """Load now, then watch from a background thread (when ``watch_interval_s`` is set)."""
        self.current()
        if self.watch_interval_s is None or self._watcher is not None:
            return self
        self._watcher = Periodic(
            self._watch,
            self.watch_interval_s,
            "mnemoray-snapshot-watch",
            on_error=self._watch_failed,
        ).start()
        return self

    def _watch(self) -> None:
        self.refresh()
        self.last_error = None

    def _watch_failed(self, exc: Exception) -> None:
        # A half-written store must not stop the watcher: the old snapshot keeps serving.
        self.failures += 1
        self.last_error = str(exc)
        log.exception(
            "memory store reload failed; still serving version %s",
            None if self._snap is None else self._snap.version,
        )

    def stop(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop(timeout=5)

    def stats(self) -> dict[str, object]:
        snap = self._snap
        return {
            "reloads": self.reloads,
            "reload_failures": self.failures,
            "last_load_ms": round(self.last_load_s * 1000, 3),
            # Shards whose files failed to load: their tenants get 500s until repaired.
            "damaged_shards": len(snap.damaged) if snap is not None else 0,
        }
