"""Small SQLite files of memory hygiene inside the store (``STORE/hygiene/``).

``consolidation.db``: which memory was merged into which consolidated summary, and
when an original expires. ``usage.db``: how often and when each memory was recalled.
Both are bookkeeping beside the store, never its data: losing one loses no memory
(consolidation re-derives coverage from the summaries' provenance; eviction then
treats memories as never recalled).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

HYGIENE_DIR = "hygiene"


def hygiene_path(store_root: str | Path, name: str) -> Path:
    return Path(store_root) / HYGIENE_DIR / name


class SmallDb:
    """One SQLite file (WAL), one connection per thread; ``tx()`` is BEGIN IMMEDIATE.
    ``durable``: every commit is on disk before it returns (``synchronous = FULL``; the
    job queue's promise), else SQLite's WAL default. ``on_commit``: called after each
    committed ``tx()`` (e.g. to wake waiters). ``schema``: statements, or one string
    of them split at ``;``."""

    def __init__(
        self,
        path: str | Path,
        schema: str | Sequence[str],
        *,
        busy_timeout_s: float = 30.0,
        durable: bool = False,
        on_commit: Callable[[], object] | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._timeout = busy_timeout_s
        self._durable = durable
        self._on_commit = on_commit
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.conn().execute("PRAGMA journal_mode = WAL")
        with self.tx() as c:
            for statement in schema.split(";") if isinstance(schema, str) else schema:
                if statement.strip():
                    c.execute(statement)

    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            if self._durable:
                conn.execute("PRAGMA synchronous = FULL")  # committed means on disk
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if self._on_commit is not None:
            self._on_commit()

    def close(self) -> None:
        with self._lock:
            conns, self._conns, self._local = self._conns, [], threading.local()
        for conn in conns:
            conn.close()
