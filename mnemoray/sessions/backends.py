"""Which session store a location names: ``postgresql://...`` a PostgreSQL database
(processes on many nodes), ``:memory:`` or a path a SQLite database (one machine: never
on a network filesystem, docs/operations.md)."""

from __future__ import annotations

from pathlib import Path

from mnemoray.postgres import is_postgres_url
from mnemoray.sessions.store import SessionStore

#: What a session location may be, for the messages that refuse any other.
SUPPORTED = "a file path (SQLite), :memory: or a postgresql:// URL"


def open_session_store(location: str | Path) -> SessionStore:
    """The session store at ``location``, its schema created or migrated."""
    if is_postgres_url(location):
        from mnemoray.sessions.postgres.store import PostgresSessionStore

        return PostgresSessionStore(str(location))
    from mnemoray.sessions.sqlite.store import SQLiteSessionStore

    return SQLiteSessionStore(location)
