"""Forgetting reaches the ingestion queue: a job queued before an erase writes nothing.

A user tombstone hides only what was stored before it, so a session still waiting in
``jobs.db`` (or a failed job retried later) would write the erased memories back, and
its stored input would outlive the erase. :func:`guard_jobs` makes a service's
``forget_user`` / ``forget_session`` first cancel the owner's queued and failed jobs
and drop their input (:meth:`JobQueue.forget_owner`); a job running meanwhile checks
the erasure before and after its write (``JobWorker.run_job``, ``mnemoray.http.ingestion``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mnemoray.memory.ingest.queue import JobQueue

if TYPE_CHECKING:
    from mnemoray.memory.service.service import MemoryService

JOBS_DB = "jobs.db"  # Serve's default place: beside sessions.db in the store


def guard_jobs(service: MemoryService, queue: JobQueue) -> JobQueue:
    """Forgets on ``service`` cancel the owner's jobs in ``queue`` first."""
    service.hooks.before_erase(lambda app, user, session: queue.forget_owner(app, user, session))
    return queue


def guard_store_jobs(
    service: MemoryService,
    path: str | Path | None = None,
) -> JobQueue | None:
    """:func:`guard_jobs` with the queue file at ``path`` (default ``STORE/jobs.db``),
    when one exists (a store no server ran has none); the opened queue, to close."""
    path = Path(path) if path is not None else Path(service.store.root) / JOBS_DB
    if not path.is_file():
        return None
    return guard_jobs(service, JobQueue(path))


__all__ = ["JOBS_DB", "guard_jobs", "guard_store_jobs"]
