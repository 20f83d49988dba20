"""The SQLite session store's tables and rows: the schema, and events serialized
ahead of a write transaction (which then only writes)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemoray.sessions.events import Event, EventError
from mnemoray.sessions.state import split_delta

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


def to_json(value: Any, field: str) -> str:
    try:
        # allow_nan=False: NaN would be read back as NaN and answered as null.
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EventError(f"not JSON-serializable ({exc})", field=field) from exc


def event_body(event: Event) -> str:
    # Check field by field first so the error names the offending field.
    for name in ("data", "artifact_delta"):
        to_json(getattr(event, name), name)
    for key, value in event.state_delta.items():
        to_json(value, f"state_delta.{key}")
    return to_json(event.to_dict(), "event")


@dataclass(frozen=True)
class Prepared:
    """Events serialized ahead of the write transaction (it then only writes)."""

    bodies: list[str]
    app_rows: dict[str, str]  # app: / user: state rows; a later event's value of a key wins
    user_rows: dict[str, str]

    @classmethod
    def of(cls, events: Sequence[Event]) -> Prepared:
        out = cls([event_body(e) for e in events], {}, {})
        for event in events:
            delta = split_delta(event.state_delta)
            out.app_rows.update({k: to_json(v, f"state_delta.{k}") for k, v in delta.app.items()})
            out.user_rows.update({k: to_json(v, f"state_delta.{k}") for k, v in delta.user.items()})
        return out
