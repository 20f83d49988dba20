"""The SQLite session store's tables: the schema and its migrations (the rows' JSON is
:mod:`mnemoray.sessions.serialized`)."""

from __future__ import annotations

SCHEMA_VERSION = 2

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS sessions (
        app_name   TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        session_id TEXT NOT NULL,
        state      TEXT NOT NULL,           -- session-scoped keys only, JSON
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        ended_at   REAL,
        version    INTEGER NOT NULL,        -- number of persisted events
        created_state TEXT,                 -- all scopes but temp: at creation, JSON; NULL:
                                            -- created before version 2 kept it
        PRIMARY KEY (app_name, user_id, session_id))""",
    """CREATE TABLE IF NOT EXISTS events (
        app_name   TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,        -- 0-based position in the session
        event_id   TEXT NOT NULL,
        body       TEXT NOT NULL,           -- Event.to_dict() as JSON
        PRIMARY KEY (app_name, user_id, session_id, seq),
        UNIQUE (app_name, user_id, session_id, event_id))""",
    """CREATE TABLE IF NOT EXISTS app_state (
        app_name TEXT NOT NULL,
        key      TEXT NOT NULL,
        value    TEXT NOT NULL,             -- JSON
        PRIMARY KEY (app_name, key))""",
    """CREATE TABLE IF NOT EXISTS user_state (
        app_name TEXT NOT NULL,
        user_id  TEXT NOT NULL,
        key      TEXT NOT NULL,
        value    TEXT NOT NULL,             -- JSON
        PRIMARY KEY (app_name, user_id, key))""",
)

#: version -> the statements that take a file of that version to the next one: an older file
#: is brought up to date when a store opens it (version 0: a new file, made by SCHEMA).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE sessions ADD COLUMN created_state TEXT",),
}
