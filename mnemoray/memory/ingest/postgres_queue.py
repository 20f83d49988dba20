"""The ingestion queue in PostgreSQL: jobs shared by replicas on many nodes.

The same rules as the SQLite queue (:class:`~mnemoray.memory.ingest.queue.JobQueue`,
whose SQL this runs); what differs is how rows are taken and numbered. A claim locks
the oldest due job with ``FOR UPDATE SKIP LOCKED``, so workers on any node each take a
different job without waiting on one another; job numbers come from a sequence.
Every commit is durable before the caller hears of the job (PostgreSQL's default
``synchronous_commit``). The tables live in the ``mnemoray`` schema beside the
sessions', migrated by :data:`MIGRATIONS`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mnemoray.locations import shown
from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.postgres import Migrations, open_pool

MIGRATIONS = Migrations(
    "jobs",
    [
        (
            "CREATE SEQUENCE jobs_seq",
            """CREATE TABLE jobs (
                job_id         text PRIMARY KEY,
                seq            bigint NOT NULL,
                app_name       text NOT NULL,
                user_id        text NOT NULL,
                kind           text NOT NULL,
                session_id     text NOT NULL,
                payload        text,
                status         text NOT NULL,
                memories_added integer NOT NULL DEFAULT 0,
                error          text,
                attempts       integer NOT NULL DEFAULT 0,
                created_at     double precision NOT NULL,
                updated_at     double precision NOT NULL,
                tries          integer NOT NULL DEFAULT 0,
                not_before     double precision,
                owner          text,
                heartbeat      double precision,
                submitter      text,
                payload_chars  integer NOT NULL DEFAULT 0)""",
            "CREATE INDEX jobs_status ON jobs (status, seq)",
            "CREATE INDEX jobs_submitter ON jobs (submitter, status)",
            "CREATE INDEX jobs_owner ON jobs (app_name, user_id, session_id)",
            """CREATE TABLE erasures (
                app_name   text NOT NULL,
                user_id    text NOT NULL,
                session_id text NOT NULL,
                at         double precision NOT NULL)""",
            "CREATE INDEX erasures_owner ON erasures (app_name, user_id, at)",
        ),
    ],
)


class _Marks:
    """A psycopg connection that reads the queue's ``?`` marks as ``%s`` (its SQL holds
    no literal ``?`` or ``%``)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql.replace("?", "%s"), params)


class PostgresJobQueue(JobQueue):
    """Jobs in a PostgreSQL database named by a ``postgresql://`` URL."""

    _CLAIM_LOCK = " FOR UPDATE SKIP LOCKED"

    def __init__(self, url: str, *, pool_size: int = 4, connect_timeout_s: float = 30.0) -> None:
        # Not JobQueue.__init__: that one opens a SQLite file.
        self.path = url
        self.changed = threading.Condition()
        self.owner = uuid.uuid4().hex
        self._pool = open_pool(
            url,
            field="jobs",
            migrations=MIGRATIONS,
            max_size=pool_size,
            timeout_s=connect_timeout_s,
        )

    def __repr__(self) -> str:
        return f"PostgresJobQueue({shown(self.path)!r})"

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._pool.connection() as conn:
            yield _Marks(conn)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._pool.connection() as conn, conn.transaction():
            yield _Marks(conn)
        self._notify()  # after the commit, as SQLite's on_commit

    def _next_seq(self, c: Any) -> int:
        return int(c.execute("SELECT nextval('jobs_seq')").fetchone()[0])

    def close(self) -> None:
        self._pool.close()
