"""Which job queue a location names: ``postgresql://...`` a PostgreSQL database (replicas
on many nodes), anything else a SQLite file (one machine: never on a network
filesystem, docs/operations.md)."""

from __future__ import annotations

from pathlib import Path

from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.postgres import is_postgres_url


def open_job_queue(location: str | Path) -> JobQueue:
    """The queue at ``location``, its schema created or migrated."""
    if is_postgres_url(location):
        from mnemoray.memory.ingest.postgres_queue import PostgresJobQueue

        return PostgresJobQueue(str(location))
    return JobQueue(location)
