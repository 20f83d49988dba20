"""The durable ingestion queue: jobs in one SQLite file (WAL, every commit on disk; the
connections are :class:`~mnemoray.memory.store.hygiene_db.SmallDb`'s, one per thread).

A job is committed to disk before anyone is told about it (the HTTP answer carries
its id), so a crash loses nothing: :meth:`JobQueue.recover` puts the jobs a killed
process left ``running`` back to ``queued``. Reads are scoped to ``(app_name,
user_id)``: another tenant's job is "not found", so nothing leaks about it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from mnemoray.errors import Conflict, InvalidInput, NotFound
from mnemoray.locations import local_location
from mnemoray.memory.ingest.job import FORGOTTEN, Job, JobStatus, PendingBound
from mnemoray.memory.store.hygiene_db import SmallDb

#: What a job queue location may be, for the message that refuses any other.
SUPPORTED = "a file path (SQLite)"

_SCHEMA = """CREATE TABLE IF NOT EXISTS jobs (
    job_id         TEXT PRIMARY KEY,
    seq            INTEGER NOT NULL,        -- FIFO order
    app_name       TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    kind           TEXT NOT NULL,           -- what enqueued it: session_end, trigger, add_session
    session_id     TEXT NOT NULL,
    payload        TEXT,                    -- the posted session (JSON); NULL: read the store
    status         TEXT NOT NULL,
    memories_added INTEGER NOT NULL DEFAULT 0,
    error          TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    tries          INTEGER NOT NULL DEFAULT 0,  -- runs of this round (a manual retry resets)
    not_before     REAL)                        -- a queued retry waits until then"""
_INDEX = "CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, seq)"
# A user's or a session's erasure: a job created before it must write nothing
# (``session_id`` '': the whole user). Kept while a job older than it may still run.
_ERASURES = """CREATE TABLE IF NOT EXISTS erasures (
    app_name   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    at         REAL NOT NULL)"""
# Columns added after the first queues were written (a reopened old file gains them).
# ``owner`` / ``heartbeat``: which queue instance (one per replica process) runs a job,
# and when it last said it still does (:meth:`JobQueue.beat`). ``submitter``: who asked
# for it (an API key's actor; NULL: a trigger), ``payload_chars``: its input's size,
# both for :class:`PendingBound`.
_ADDED = (
    ("tries", "INTEGER NOT NULL DEFAULT 0"),
    ("not_before", "REAL"),
    ("owner", "TEXT"),
    ("heartbeat", "REAL"),
    ("submitter", "TEXT"),
    ("payload_chars", "INTEGER NOT NULL DEFAULT 0"),
)
# After the columns exist: an old file gains ``submitter`` only when reopened.
_SUBMITTER_INDEX = "CREATE INDEX IF NOT EXISTS jobs_submitter ON jobs (submitter, status)"
_PENDING = "status IN ('queued', 'running')"
_COLS = (
    "job_id, app_name, user_id, kind, session_id, payload, status, memories_added, "
    "error, attempts, created_at, updated_at, tries, not_before"
)
# Pruning these would drop input nobody ingested yet: the "never a silent drop".
_UNPRUNABLE = frozenset({"queued", "running"})


class JobQueue:
    """Jobs in one SQLite file (WAL), one connection per thread.

    The queue's rules are written once, here, in SQL both SQLite and PostgreSQL read
    (``?`` marks); :class:`~mnemoray.memory.ingest.postgres_queue.PostgresJobQueue`
    supplies its own connections, job numbers and claim lock.
    """

    #: What a claim's SELECT adds to lock the row it takes (SQLite's write transaction
    #: already holds the whole file).
    _CLAIM_LOCK = ""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        # A URL (postgresql://...) would silently become a file of that name.
        self.path = local_location(path, field="path", supported=SUPPORTED)
        self.changed = threading.Condition()  # notified on every status change here
        self.owner = uuid.uuid4().hex  # this replica's mark on the jobs it runs
        self.db = SmallDb(
            path,
            (_SCHEMA, _INDEX, _ERASURES),
            busy_timeout_s=busy_timeout_s,
            durable=True,
            on_commit=self._notify,
        )
        with self._tx() as c:
            have = {row[1] for row in c.execute("PRAGMA table_info(jobs)")}
            for name, decl in _ADDED:
                if name not in have:
                    c.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")
            c.execute(_SUBMITTER_INDEX)

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _read(self) -> AbstractContextManager[Any]:
        """A connection for reads outside a write transaction."""
        return nullcontext(self.db.conn())

    def _tx(self) -> AbstractContextManager[Any]:
        """One write transaction: committed (and :attr:`changed` notified) at the end."""
        return self.db.tx()

    def _next_seq(self, c: Any) -> int:
        # Inside the write transaction, which holds the file's lock: no two jobs share one.
        return int(c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0])

    def close(self) -> None:
        self.db.close()

    # -- writes -----------------------------------------------------------------------
    def enqueue(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        kind: str,
        payload: dict[str, Any] | None = None,
        running: bool = False,
        submitter: str | None = None,
        bound: PendingBound | None = None,
    ) -> Job:
        """Commit a new job (``running``: the caller runs it itself, now). ``submitter``:
        who asked for it; with ``bound``, :class:`~mnemoray.memory.ingest.job.QueueFull`
        (nothing queued) when it has as much pending as the bound allows, decided in
        the transaction that commits the job."""
        now = time.time()
        job_id = uuid.uuid4().hex
        body = None if payload is None else json.dumps(payload, allow_nan=False)
        chars = 0 if body is None else len(body)
        with self._tx() as c:
            if bound is not None and submitter is not None:
                bound.check(submitter, *self._pending(c, submitter), chars)
            seq = self._next_seq(c)
            c.execute(
                "INSERT INTO jobs (job_id, seq, app_name, user_id, kind, session_id, "
                "payload, status, attempts, tries, created_at, updated_at, owner, "
                "heartbeat, submitter, payload_chars) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    seq,
                    app_name,
                    user_id,
                    kind,
                    session_id,
                    body,
                    "running" if running else "queued",
                    int(running),
                    int(running),
                    now,
                    now,
                    self.owner if running else None,
                    now if running else None,
                    submitter,
                    chars,
                ),
            )
        return self._get(job_id)

    def check_room(self, submitter: str, bound: PendingBound) -> None:
        """QueueFull when ``submitter`` could not queue one more job without input (a
        caller checks before a step it cannot take back, such as ending a session)."""
        with self._read() as c:
            bound.check(submitter, *self._pending(c, submitter), 0)

    def pending(self, submitter: str) -> tuple[int, int]:
        """(jobs, characters of input) ``submitter`` has queued or running."""
        with self._read() as c:
            return self._pending(c, submitter)

    @staticmethod
    def _pending(c: Any, submitter: str) -> tuple[int, int]:
        jobs, chars = c.execute(
            f"SELECT COUNT(*), COALESCE(SUM(payload_chars), 0) FROM jobs "
            f"WHERE submitter = ? AND {_PENDING}",
            (submitter,),
        ).fetchone()
        return int(jobs), int(chars)

    def claim(self, now: float | None = None) -> Job | None:
        """The oldest queued job that is due, now ``running`` (None: nothing due)."""
        now = time.time() if now is None else now
        with self._tx() as c:
            row = c.execute(
                "SELECT job_id FROM jobs WHERE status = 'queued' AND "
                "(not_before IS NULL OR not_before <= ?) ORDER BY seq LIMIT 1" + self._CLAIM_LOCK,
                (now,),
            ).fetchone()
            if row is None:
                return None
            t = time.time()
            c.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
                "tries = tries + 1, not_before = NULL, updated_at = ?, owner = ?, "
                "heartbeat = ? WHERE job_id = ?",
                (t, self.owner, t, row[0]),
            )
        return self._get(row[0])

    def finish(self, job_id: str, memories_added: int) -> Job:
        """Done; its input is dropped (only a failed job is ever run again)."""
        return self._set(job_id, "done", memories_added, None, drop_payload=True)

    def fail(self, job_id: str, error: str) -> Job:
        """Failed for good; the input stays: :meth:`retry` reuses it."""
        return self._set(job_id, "failed", 0, error)

    def requeue(self, job_id: str, error: str, not_before: float) -> Job:
        """An automatic retry: queued again, due at ``not_before``, its error kept."""
        with self._tx() as c:
            c.execute(
                "UPDATE jobs SET status = 'queued', memories_added = 0, error = ?, "
                "not_before = ?, updated_at = ? WHERE job_id = ?",
                (error, not_before, time.time(), job_id),
            )
        return self._get(job_id)

    def retry(
        self, app_name: str, user_id: str, job_id: str, *, bound: PendingBound | None = None
    ) -> Job:
        """Queue a failed job again, with its input and a fresh round of automatic
        retries (409 unless it failed). With ``bound``: QueueFull when the job's
        submitter has as much pending as the bound allows (failed jobs are not pending,
        so retrying them must not get round it)."""
        job = self.get(app_name, user_id, job_id)
        if job.status == "failed" and job.error == FORGOTTEN:
            raise Conflict(
                f"job {job_id!r} was cancelled when its user or session was "
                f"forgotten; its input is gone",
                field="job_id",
            )
        if job.status != "failed":
            raise Conflict(
                f"job {job_id!r} is {job.status}; only a failed job is retried", field="job_id"
            )
        with self._tx() as c:
            if bound is not None:
                submitter, chars = c.execute(
                    "SELECT submitter, payload_chars FROM jobs WHERE job_id = ?", (job_id,)
                ).fetchone()
                if submitter is not None:
                    bound.check(submitter, *self._pending(c, submitter), chars)
            c.execute(
                "UPDATE jobs SET status = 'queued', error = NULL, tries = 0, "
                "not_before = NULL, updated_at = ? WHERE job_id = ? AND "
                "status = 'failed'",
                (time.time(), job_id),
            )
        return self._get(job_id)

    def forget_owner(
        self, app_name: str, user_id: str, session_id: str | None = None, now: float | None = None
    ) -> int:
        """A user (or one session of theirs) is being forgotten: record the erasure and
        cancel their queued and failed jobs, dropping every stored input of theirs
        (failed, error ``forgotten``); how many were cancelled (a job cancelled
        by an earlier erasure is not counted again). A job running now
        checks :meth:`erased_since` and writes nothing (or takes back what it wrote)."""
        now = time.time() if now is None else now
        where = "app_name = ? AND user_id = ?" + (
            "" if session_id is None else " AND session_id = ?"
        )
        who = (app_name, user_id) if session_id is None else (app_name, user_id, session_id)
        with self._tx() as c:
            c.execute(
                "INSERT INTO erasures (app_name, user_id, session_id, at) VALUES (?, ?, ?, ?)",
                (app_name, user_id, session_id or "", now),
            )
            n = c.execute(
                f"UPDATE jobs SET status = 'failed', error = ?, payload = NULL, "
                f"not_before = NULL, updated_at = ? WHERE {where} AND status IN "
                # Cancelled once, counted once.
                f"('queued', 'failed') AND (error IS NULL OR error <> ?)",
                (FORGOTTEN, now, *who, FORGOTTEN),
            ).rowcount
            c.execute(f"UPDATE jobs SET payload = NULL WHERE {where} AND status = 'done'", who)
        return n

    def erased_since(self, job: Job) -> bool:
        """Whether the job's user or session was forgotten after the job was created."""
        with self._read() as c:
            row = c.execute(
                "SELECT 1 FROM erasures WHERE app_name = ? AND user_id = ? AND "
                "session_id IN ('', ?) AND at >= ? LIMIT 1",
                (job.app_name, job.user_id, job.session_id, job.created_at),
            ).fetchone()
        return row is not None

    def cancel_forgotten(self, job_id: str) -> Job:
        """A job whose owner was forgotten while it ran: failed, ``forgotten``, no input."""
        with self._tx() as c:
            c.execute(
                "UPDATE jobs SET status = 'failed', error = ?, payload = NULL, "
                "memories_added = 0, not_before = NULL, updated_at = ? "
                "WHERE job_id = ?",
                (FORGOTTEN, time.time(), job_id),
            )
        return self._get(job_id)

    def beat(self, now: float | None = None) -> int:
        """Say that this queue's running jobs still run (the worker calls it every few
        seconds); how many."""
        with self._tx() as c:
            return c.execute(
                "UPDATE jobs SET heartbeat = ? WHERE owner = ? AND status = 'running'",
                (time.time() if now is None else now, self.owner),
            ).rowcount

    def recover(
        self,
        max_tries: int | None = None,
        stale_after_s: float | None = None,
        now: float | None = None,
    ) -> int:
        """Jobs left ``running`` by a stopped process go back to ``queued``; with
        ``max_tries``, one that already had that many runs this round fails instead (a
        job that kills its process must not do so forever). ``stale_after_s``: only
        jobs whose runner has not beaten for that long (another replica's live jobs
        stay its own); None: every running job (one process per queue). Returns those
        requeued."""
        now = time.time() if now is None else now
        stale = "" if stale_after_s is None else " AND (heartbeat IS NULL OR heartbeat < ?)"
        since = () if stale_after_s is None else (now - float(stale_after_s),)
        with self._tx() as c:
            if max_tries is not None:
                c.execute(
                    f"UPDATE jobs SET status = 'failed', error = ?, updated_at = ? "
                    f"WHERE status = 'running' AND tries >= ?{stale}",
                    (
                        f"the process running it stopped {max_tries} times; retry it by hand",
                        now,
                        max_tries,
                        *since,
                    ),
                )
            return c.execute(
                f"UPDATE jobs SET status = 'queued', updated_at = ? "
                f"WHERE status = 'running'{stale}",
                (now, *since),
            ).rowcount

    def prune(
        self, older_than_s: float, statuses: Iterable[str] = ("done",), now: float | None = None
    ) -> int:
        """Delete jobs in ``statuses`` (``done``, ``failed``) last changed more than
        ``older_than_s`` ago; how many. Queued and running jobs are never pruned."""
        wanted = sorted(set(statuses))
        bad = [s for s in wanted if s in _UNPRUNABLE or s not in ("done", "failed")]
        if bad:
            raise InvalidInput(
                f"{bad[0]!r}: only done and failed jobs are pruned", field="statuses"
            )
        if not float(older_than_s) >= 0:
            raise InvalidInput("must be >= 0", field="older_than_s")
        if not wanted:
            return 0
        cutoff = (time.time() if now is None else now) - float(older_than_s)
        marks = ", ".join("?" * len(wanted))
        with self._tx() as c:
            n = c.execute(
                f"DELETE FROM jobs WHERE status IN ({marks}) AND updated_at < ?", (*wanted, cutoff)
            ).rowcount
            # An erasure matters only to jobs created before it that may still run.
            c.execute(
                "DELETE FROM erasures WHERE at < ? AND at < COALESCE((SELECT "
                "MIN(created_at) FROM jobs WHERE status IN ('queued', 'running')), ?)",
                (cutoff, cutoff),
            )
            return n

    def _set(
        self,
        job_id: str,
        status: JobStatus,
        added: int,
        error: str | None,
        *,
        drop_payload: bool = False,
    ) -> Job:
        payload = ", payload = NULL" if drop_payload else ""
        with self._tx() as c:
            c.execute(
                f"UPDATE jobs SET status = ?, memories_added = ?, error = ?, "
                f"not_before = NULL, updated_at = ?{payload} WHERE job_id = ?",
                (status, added, error, time.time(), job_id),
            )
        return self._get(job_id)

    # -- reads ------------------------------------------------------------------------
    def _get(self, job_id: str) -> Job:
        with self._read() as c:
            row = c.execute(f"SELECT {_COLS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r}", field="job_id")
        return Job._from_row(row)

    def get(self, app_name: str, user_id: str, job_id: str) -> Job:
        """The tenant's job; another tenant's is "not found" (nothing leaks)."""
        with self._read() as c:
            row = c.execute(
                f"SELECT {_COLS} FROM jobs WHERE job_id = ? AND app_name = ? AND user_id = ?",
                (job_id, app_name, user_id),
            ).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r} for this user", field="job_id")
        return Job._from_row(row)

    def depth(self) -> int:  # queued (retries waiting included) or running
        with self._read() as c:
            return int(c.execute(f"SELECT COUNT(*) FROM jobs WHERE {_PENDING}").fetchone()[0])

    def next_due(self) -> float | None:
        """When the earliest queued job is due (None: nothing queued)."""
        with self._read() as c:
            row = c.execute(
                "SELECT MIN(COALESCE(not_before, 0)) FROM jobs WHERE status = 'queued'"
            ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def wait(
        self,
        app_name: str,
        user_id: str,
        job_id: str,
        timeout_s: float | None = None,
        poll_s: float = 0.2,
    ) -> Job:
        """Block until the job is done or failed for good (another process's worker
        included: the file is polled), or ``timeout_s`` passes; the job as it is then."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            job = self.get(app_name, user_id, job_id)
            left = None if deadline is None else deadline - time.monotonic()
            if job.status in ("done", "failed") or (left is not None and left <= 0):
                return job
            with self.changed:
                self.changed.wait(poll_s if left is None else min(poll_s, left))
