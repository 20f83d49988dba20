"""Recall usage per memory, counted off the recall path (``STORE/hygiene/usage.db``).

    usage = RecallUsage.of_store(service.store.root).attach(service)

The ``on_memory_recalled`` hook (delivered on the hooks' own thread) only bumps an
in-memory counter; a background thread adds the counters to the SQLite file every
``flush_interval_s`` (and on :meth:`flush` / :meth:`stop`). Replicas sharing a store
add to the same rows (``recalls = recalls + n``, ``last = max(last, t)``), so
nothing one of them counted is overwritten by another. A crash loses at most the
last interval's counts: usage steers eviction, it is no record of truth.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from mnemoray.memory.service.hooks import MemoryEvent
from mnemoray.memory.store.hygiene_db import SmallDb, hygiene_path
from mnemoray.periodic import Periodic

if TYPE_CHECKING:
    from mnemoray.memory.service.service import MemoryService

log = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS usage (
    app_name         TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    memory_id        TEXT NOT NULL,
    recalls          INTEGER NOT NULL,
    last_recalled_at REAL NOT NULL,
    PRIMARY KEY (app_name, user_id, memory_id))"""
Key = tuple[str, str, str]
Usage = tuple[int, float]  # (recalls, last recalled at)


class RecallUsage:
    def __init__(self, path: str | Path, *, flush_interval_s: float = 30.0) -> None:
        self.db = SmallDb(path, _SCHEMA)
        self._pending: dict[Key, list[float]] = {}  # key -> [recalls, last]
        self._lock = threading.Lock()  # the counters (held for a dict update only)
        # Held through a flush: a reader never sees counts that left the counters but are
        # not committed yet.
        self._flushing = threading.Lock()
        self._flusher = Periodic(self._flush_tick, flush_interval_s, "mnemoray-recall-usage")

    @property
    def flush_interval_s(self) -> float:
        return self._flusher.interval_s

    @flush_interval_s.setter
    def flush_interval_s(self, seconds: float) -> None:  # read at each wait
        self._flusher.interval_s = seconds

    @classmethod
    def of_store(cls, store_root: str | Path, **options: float) -> RecallUsage:
        return cls(hygiene_path(store_root, "usage.db"), **options)

    # -- counting (cheap: a dict update) ---------------------------------------------------
    def touch(
        self, app_name: str, user_id: str, memory_ids: Iterable[str], at: float | None = None
    ) -> None:
        at = time.time() if at is None else at
        with self._lock:
            for memory_id in memory_ids:
                slot = self._pending.setdefault((app_name, user_id, memory_id), [0, at])
                slot[0] += 1
                slot[1] = max(slot[1], at)

    def on_recalled(self, event: MemoryEvent) -> None:
        """The ``on_memory_recalled`` hook."""
        self.touch(event.app_name, event.user_id, event.memory_ids, event.at)

    def on_forgotten(self, event: MemoryEvent) -> None:
        """The ``on_memory_forgotten`` hook: a forgotten memory's usage goes too."""
        self.drop(event.app_name, event.user_id, event.memory_ids)

    def attach(self, service: MemoryService, *, start: bool = True) -> RecallUsage:
        service.on_memory_recalled(self.on_recalled)
        service.on_memory_forgotten(self.on_forgotten)
        return self.start() if start else self

    # -- the file ------------------------------------------------------------------------
    def flush(self) -> int:
        """Add the pending counters to the file in one transaction; how many rows."""
        with self._flushing:
            return self._flush()

    def _flush(self) -> int:
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return 0
        try:
            with self.db.tx() as c:
                c.executemany(
                    "INSERT INTO usage (app_name, user_id, memory_id, recalls, "
                    "last_recalled_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (app_name, "
                    "user_id, memory_id) DO UPDATE SET recalls = recalls + excluded.recalls, "
                    "last_recalled_at = MAX(last_recalled_at, excluded.last_recalled_at)",
                    [(*k, int(v[0]), float(v[1])) for k, v in pending.items()],
                )
        except Exception:
            with self._lock:  # keep them for the next flush
                for k, (n, last) in pending.items():
                    slot = self._pending.setdefault(k, [0, last])
                    slot[0] += n
                    slot[1] = max(slot[1], last)
            raise
        return len(pending)

    def of_user(self, app_name: str, user_id: str) -> dict[str, Usage]:
        """memory_id -> (recalls, last recalled at), the file and the pending counts."""
        with self._flushing:
            return self._of_user(app_name, user_id)

    def _of_user(self, app_name: str, user_id: str) -> dict[str, Usage]:
        rows = (
            self.db.conn()
            .execute(
                "SELECT memory_id, recalls, last_recalled_at FROM usage WHERE app_name = ? AND "
                "user_id = ?",
                (app_name, user_id),
            )
            .fetchall()
        )
        out: dict[str, Usage] = {m: (int(n), float(t)) for m, n, t in rows}
        with self._lock:
            for (a, u, m), (n, t) in self._pending.items():
                if (a, u) == (app_name, user_id):
                    old = out.get(m, (0, t))
                    out[m] = (old[0] + int(n), max(old[1], float(t)))
        return out

    def drop(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None:
        ids = list(memory_ids)
        with self._flushing:  # a flush in flight must not write them back
            with self._lock:
                for m in ids:
                    self._pending.pop((app_name, user_id, m), None)
            with self.db.tx() as c:
                c.executemany(
                    "DELETE FROM usage WHERE app_name = ? AND user_id = ? AND memory_id = ?",
                    [(app_name, user_id, m) for m in ids],
                )

    # -- the flusher -----------------------------------------------------------------------
    def start(self) -> RecallUsage:
        self._flusher.start()
        return self

    def stop(self) -> None:
        self._flusher.stop(timeout=10)
        try:
            self.flush()
        finally:
            self.db.close()

    def _flush_tick(self) -> None:
        try:
            self.flush()
        except Exception:  # the next interval tries again with the same counts
            log.exception("recall usage: flush failed")
