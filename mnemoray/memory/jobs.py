"""Durable ingestion jobs: a queue in SQLite and the worker thread that drains it.

A job is committed to disk before anyone is told about it (the HTTP answer carries
its id), so a crash loses nothing: on start, :meth:`JobQueue.recover` puts the jobs
a killed process left ``running`` back to ``queued`` and the worker runs them again.
That is safe because ingestion is idempotent (records are keyed by content hash),
which is also why several replicas may share one queue file: a job reclaimed while
another replica still runs it is merely ingested twice.

A job's input is a session key (``payload`` None: the session store holds it) or
the posted session dict. A failed job keeps it and its public error, for
:meth:`JobQueue.retry`. Reads are scoped to ``(app_name, user_id)``: another
tenant's job is "not found", so nothing leaks about it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mnemoray.errors import Conflict, MnemorayError, NotFound

log = logging.getLogger(__name__)

JobStatus = Literal["queued", "running", "done", "failed"]

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
    updated_at     REAL NOT NULL)"""
_INDEX = "CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, seq)"
_COLS = ("job_id, app_name, user_id, kind, session_id, payload, status, memories_added, "
         "error, attempts, created_at, updated_at")


@dataclass(frozen=True)
class Job:
    job_id: str
    app_name: str
    user_id: str
    kind: str
    session_id: str
    payload: dict[str, Any] | None
    status: JobStatus
    memories_added: int
    error: str | None
    attempts: int
    created_at: float
    updated_at: float

    @classmethod
    def _from_row(cls, row: tuple[Any, ...]) -> Job:
        return cls(*row[:5], None if row[5] is None else json.loads(row[5]), *row[6:])

    def public(self) -> dict[str, Any]:
        """What a client sees (``GET /v1/jobs/{id}``)."""
        return {"job_id": self.job_id, "status": self.status,
                "memories_added": self.memories_added, "error": self.error}


def public_error(exc: BaseException) -> str:
    """The error text a client may read: a library error's own message, else the
    class only (internals go to the log)."""
    if isinstance(exc, MnemorayError) and type(exc).public:
        return str(exc)
    return f"internal error ({type(exc).__name__}); the server logged it"


class JobQueue:
    """Jobs in one SQLite file (WAL), one connection per thread."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._timeout = busy_timeout_s
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.changed = threading.Condition()  # notified on every status change here
        self._conn().execute("PRAGMA journal_mode = WAL")
        with self._tx() as c:
            c.execute(_SCHEMA)
            c.execute(_INDEX)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA synchronous = FULL")  # committed means on disk
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        with self.changed:
            self.changed.notify_all()

    def close(self) -> None:
        with self._lock:
            conns, self._conns, self._local = self._conns, [], threading.local()
        for conn in conns:
            conn.close()

    # -- writes -----------------------------------------------------------------------
    def enqueue(self, app_name: str, user_id: str, session_id: str, *, kind: str,
                payload: dict[str, Any] | None = None, running: bool = False) -> Job:
        """Commit a new job (``running``: the caller runs it itself, now)."""
        now = time.time()
        job_id = uuid.uuid4().hex
        body = None if payload is None else json.dumps(payload, allow_nan=False)
        with self._tx() as c:
            seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
            c.execute("INSERT INTO jobs (job_id, seq, app_name, user_id, kind, session_id, "
                      "payload, status, attempts, created_at, updated_at) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (job_id, seq, app_name, user_id, kind, session_id, body,
                       "running" if running else "queued", int(running), now, now))
        return self._get(job_id)

    def claim(self) -> Job | None:
        """The oldest queued job, now ``running`` (None: nothing queued)."""
        with self._tx() as c:
            row = c.execute("SELECT job_id FROM jobs WHERE status = 'queued' "
                            "ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            c.execute("UPDATE jobs SET status = 'running', attempts = attempts + 1, "
                      "updated_at = ? WHERE job_id = ?", (time.time(), row[0]))
        return self._get(row[0])

    def finish(self, job_id: str, memories_added: int) -> Job:
        return self._set(job_id, "done", memories_added, None)

    def fail(self, job_id: str, error: str) -> Job:  # the input stays: retry() reuses it
        return self._set(job_id, "failed", 0, error)

    def retry(self, app_name: str, user_id: str, job_id: str) -> Job:
        """Queue a failed job again, with its input (409 unless it failed)."""
        job = self.get(app_name, user_id, job_id)
        if job.status != "failed":
            raise Conflict(f"job {job_id!r} is {job.status}; only a failed job is retried",
                           field="job_id")
        with self._tx() as c:
            c.execute("UPDATE jobs SET status = 'queued', error = NULL, updated_at = ? "
                      "WHERE job_id = ? AND status = 'failed'", (time.time(), job_id))
        return self._get(job_id)

    def recover(self) -> int:
        """Jobs left ``running`` by a stopped process go back to ``queued``."""
        with self._tx() as c:
            return c.execute("UPDATE jobs SET status = 'queued', updated_at = ? "
                             "WHERE status = 'running'", (time.time(),)).rowcount

    def _set(self, job_id: str, status: JobStatus, added: int, error: str | None) -> Job:
        with self._tx() as c:
            c.execute("UPDATE jobs SET status = ?, memories_added = ?, error = ?, "
                      "updated_at = ? WHERE job_id = ?",
                      (status, added, error, time.time(), job_id))
        return self._get(job_id)

    # -- reads ------------------------------------------------------------------------
    def _get(self, job_id: str) -> Job:
        row = self._conn().execute(f"SELECT {_COLS} FROM jobs WHERE job_id = ?",
                                   (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r}", field="job_id")
        return Job._from_row(row)

    def get(self, app_name: str, user_id: str, job_id: str) -> Job:
        """The tenant's job; another tenant's is "not found" (nothing leaks)."""
        row = self._conn().execute(
            f"SELECT {_COLS} FROM jobs WHERE job_id = ? AND app_name = ? AND user_id = ?",
            (job_id, app_name, user_id)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r} for this user", field="job_id")
        return Job._from_row(row)

    def depth(self) -> int:  # queued or running
        return int(self._conn().execute("SELECT COUNT(*) FROM jobs WHERE status IN "
                                        "('queued', 'running')").fetchone()[0])

    def wait(self, app_name: str, user_id: str, job_id: str,
             timeout_s: float | None = None, poll_s: float = 0.2) -> Job:
        """Block until the job is done or failed (another process's worker included:
        the file is polled), or ``timeout_s`` passes; the job as it is then."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            job = self.get(app_name, user_id, job_id)
            left = None if deadline is None else deadline - time.monotonic()
            if job.status in ("done", "failed") or (left is not None and left <= 0):
                return job
            with self.changed:
                self.changed.wait(poll_s if left is None else min(poll_s, left))


RunJob = Callable[[Job], int]  # runs the ingestion, returns the memories it added
OnFinish = Callable[[Job], object]


class JobWorker:
    """One daemon thread: claims queued jobs in order and runs ``run(job)``, which
    returns the memories it added; an exception marks the job failed."""

    def __init__(self, queue: JobQueue, run: RunJob, *, poll_s: float = 0.5,
                 on_finish: OnFinish | None = None) -> None:
        self.queue = queue
        self._run = run
        self._poll_s = poll_s
        self._on_finish = on_finish
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> JobWorker:  # resume what a stopped process left, then drain
        resumed = self.queue.recover()
        if resumed:
            log.warning("ingestion jobs: %d left running by a stopped process, requeued", resumed)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="mnemoray-ingestion-jobs",
                                        daemon=True)
        self._thread.start()
        return self

    def notify(self) -> None:
        """A job was queued: look now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stopping.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def run_once(self) -> Job | None:
        """Claim and run one job (None: the queue was empty)."""
        job = self.queue.claim()
        if job is not None:
            job = self.run_job(job)
        return job

    def run_job(self, job: Job) -> Job:
        """Run a job already marked running; record done or failed."""
        try:
            added = self._run(job)
        except Exception as exc:  # recorded on the job, never lost
            log.error("ingestion job %s (%s/%s/%s) failed", job.job_id, job.app_name,
                      job.user_id, job.session_id, exc_info=exc)
            job = self.queue.fail(job.job_id, public_error(exc))
        else:
            job = self.queue.finish(job.job_id, int(added))
        if self._on_finish is not None:
            try:
                self._on_finish(job)
            except Exception:
                log.exception("ingestion jobs: on_finish failed")
        return job

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                job = self.run_once()
            except Exception:  # a store hiccup must not kill the worker
                log.exception("ingestion jobs: claim failed")
                job = None
            if job is None:  # idle: until the next poll or a notify()
                self._wake.wait(self._poll_s)
                self._wake.clear()
