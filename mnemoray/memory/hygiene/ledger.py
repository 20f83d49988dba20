"""Which memories were consolidated into which summary (``STORE/hygiene/consolidation.db``).

The ledger is what makes consolidation idempotent across runs, even after a summary
is forgotten: an original it lists is never merged again. A crash between writing a
summary and recording it here is healed by :meth:`ConsolidationLedger.reconcile`
from the summary's own provenance (its ``source_event_ids``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from mnemoray.memory.store.hygiene_db import SmallDb, hygiene_path

# The consolidation's own names, here so the job and its forget cascade share them.
CONSOLIDATED_KIND = "consolidated_summary"
ACTOR = "consolidation"  # the actor of every forget the consolidation does

_SCHEMA = """CREATE TABLE IF NOT EXISTS consolidated (
    app_name        TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    memory_id       TEXT NOT NULL,   -- an original
    summary_id      TEXT NOT NULL,   -- the consolidated summary that merges it
    consolidated_at REAL NOT NULL,
    expire_at       REAL,            -- NULL: the original is kept
    expired_at      REAL,            -- when it was forgotten as consolidated
    PRIMARY KEY (app_name, user_id, memory_id));
CREATE INDEX IF NOT EXISTS consolidated_due ON consolidated (expired_at, expire_at)"""


class ConsolidationLedger:
    def __init__(self, path: str | Path) -> None:
        self.db = SmallDb(path, _SCHEMA)

    @classmethod
    def of_store(cls, store_root: str | Path) -> ConsolidationLedger:
        return cls(hygiene_path(store_root, "consolidation.db"))

    def close(self) -> None:
        self.db.close()

    def covered(self, app_name: str, user_id: str) -> set[str]:
        """The user's memory ids already merged into a summary."""
        rows = (
            self.db.conn()
            .execute(
                "SELECT memory_id FROM consolidated WHERE app_name = ? AND user_id = ?",
                (app_name, user_id),
            )
            .fetchall()
        )
        return {r[0] for r in rows}

    def record(
        self,
        app_name: str,
        user_id: str,
        summary_id: str,
        originals: Sequence[str],
        expire_at: float | None,
        now: float | None = None,
    ) -> int:
        """Record ``originals`` as merged into ``summary_id`` (ids already recorded keep
        their first summary); how many were new."""
        now = time.time() if now is None else now
        with self.db.tx() as c:
            before = c.total_changes
            c.executemany(
                "INSERT OR IGNORE INTO consolidated (app_name, user_id, memory_id, "
                "summary_id, consolidated_at, expire_at) VALUES (?, ?, ?, ?, ?, ?)",
                [(app_name, user_id, m, summary_id, now, expire_at) for m in originals],
            )
            return c.total_changes - before

    def reconcile(
        self,
        app_name: str,
        user_id: str,
        summaries: Iterable[tuple[str, Sequence[str], float]],
        expire_after_s: float | None,
    ) -> int:
        """Record what stored summaries (id, originals, created_at) merge but the ledger
        lacks (a run stopped between the two writes); how many were missing."""
        covered = self.covered(app_name, user_id)
        added = 0
        for summary_id, originals, created_at in summaries:
            missing = [m for m in originals if m not in covered]
            if missing:
                expire_at = None if expire_after_s is None else created_at + expire_after_s
                added += self.record(
                    app_name, user_id, summary_id, missing, expire_at, now=created_at
                )
                covered.update(missing)
        return added

    def due(self, app_name: str, user_id: str, now: float | None = None) -> list[str]:
        """Originals of the user whose expiry has come and that are not yet forgotten."""
        now = time.time() if now is None else now
        rows = (
            self.db.conn()
            .execute(
                "SELECT memory_id FROM consolidated WHERE app_name = ? AND user_id = ? AND "
                "expired_at IS NULL AND expire_at IS NOT NULL AND expire_at <= ? "
                "ORDER BY expire_at, memory_id",
                (app_name, user_id, now),
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    def mark_expired(
        self, app_name: str, user_id: str, memory_ids: Sequence[str], now: float | None = None
    ) -> None:
        now = time.time() if now is None else now
        with self.db.tx() as c:
            c.executemany(
                "UPDATE consolidated SET expired_at = ? WHERE app_name = ? AND "
                "user_id = ? AND memory_id = ?",
                [(now, app_name, user_id, m) for m in memory_ids],
            )

    def release(self, app_name: str, user_id: str, summary_ids: Sequence[str]) -> int:
        """Forget that these summaries merged anything: their originals may be merged
        again (their summary is gone); how many ledger rows went."""
        with self.db.tx() as c:
            before = c.total_changes
            c.executemany(
                "DELETE FROM consolidated WHERE app_name = ? AND user_id = ? AND summary_id = ?",
                [(app_name, user_id, s) for s in summary_ids],
            )
            return c.total_changes - before
