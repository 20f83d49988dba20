"""PostgreSQL session store: sessions shared by processes on many nodes.

The same contract as the SQLite store (tests/sessions/test_session_store.py runs one
suite over both): each append is one transaction that locks the session's row
(``SELECT ... FOR UPDATE``) and checks its version against the caller's copy, so of
concurrent writers holding the same copy one commits and the others get
:class:`StaleSessionError`; an event is never lost or silently overwritten. Connections
come from one pool per store; the schema is created and migrated by
:mod:`mnemoray.sessions.postgres.schema`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mnemoray.locations import shown
from mnemoray.postgres import open_pool
from mnemoray.sessions.events import Event
from mnemoray.sessions.postgres.schema import MIGRATIONS
from mnemoray.sessions.serialized import Prepared, to_json
from mnemoray.sessions.session import Session
from mnemoray.sessions.state import merged_state, split_delta
from mnemoray.sessions.store import SessionStore
from mnemoray.sessions.types import (
    DuplicateEventError,
    SessionEndedError,
    SessionExistsError,
    SessionInfo,
    SessionNotFoundError,
    StaleSessionError,
    initial_events,
    initial_state,
)

_KEY = "app_name = %s AND user_id = %s AND session_id = %s"
_APPS = "SELECT DISTINCT app_name FROM sessions ORDER BY app_name"


class PostgresSessionStore(SessionStore):
    """Sessions in a PostgreSQL database named by a ``postgresql://`` URL.

    ``pool_size``: the most connections this store holds open (one per concurrent call).
    """

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout_s: float = 30.0) -> None:
        super().__init__()
        self.url = url
        self._pool = open_pool(
            url,
            field="sessions",
            migrations=MIGRATIONS,
            max_size=pool_size,
            timeout_s=connect_timeout_s,
        )
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresSessionStore({shown(self.url)!r})"

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """One transaction on a pooled connection: committed when the block ends,
        rolled back (nothing written) when it raises."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        """Close the pool (every connection this store opened)."""
        self._closed = True
        self._pool.close()

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scoped state ------------------------------------------------------
    @staticmethod
    def _scoped_state(
        conn: Any, app_name: str, user_id: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        app = {
            k: json.loads(v)
            for k, v in conn.execute(
                "SELECT key, value FROM app_state WHERE app_name = %s", (app_name,)
            )
        }
        user = {
            k: json.loads(v)
            for k, v in conn.execute(
                "SELECT key, value FROM user_state WHERE app_name = %s AND user_id = %s",
                (app_name, user_id),
            )
        }
        return app, user

    @staticmethod
    def _write_scoped(
        conn: Any,
        app_name: str,
        user_id: str,
        app_rows: dict[str, str],
        user_rows: dict[str, str],
    ) -> None:
        with conn.cursor() as cur:
            if app_rows:
                cur.executemany(
                    "INSERT INTO app_state (app_name, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (app_name, key) DO UPDATE SET value = excluded.value",
                    [(app_name, k, v) for k, v in app_rows.items()],
                )
            if user_rows:
                cur.executemany(
                    "INSERT INTO user_state (app_name, user_id, key, value) "
                    "VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (app_name, user_id, key) DO UPDATE SET value = excluded.value",
                    [(app_name, user_id, k, v) for k, v in user_rows.items()],
                )

    # -- API -----------------------------------------------------------------
    def create_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
        *,
        events: Sequence[Event] = (),
    ) -> Session:
        given: dict[str, Any] = {"session_id": session_id} if session_id else {}
        fresh = Session(app_name, user_id, **given)
        delta = initial_state(state)
        first = initial_events(fresh, events)
        # Serialize before the transaction: bad state fails with nothing written.
        prepared = Prepared.of(first)
        session_json = to_json(delta.session, "state")
        app_rows = {k: to_json(v, f"state.{k}") for k, v in delta.app.items()}
        user_rows = {k: to_json(v, f"state.{k}") for k, v in delta.user.items()}
        with self._tx() as conn:
            inserted = conn.execute(
                "INSERT INTO sessions (app_name, user_id, session_id, state, "
                "created_at, updated_at, ended_at, version, created_state) "
                "VALUES (%s, %s, %s, %s, %s, %s, NULL, 0, NULL) "
                "ON CONFLICT (app_name, user_id, session_id) DO NOTHING",
                (*fresh.key, session_json, fresh.created_at, fresh.updated_at),
            ).rowcount
            if inserted == 0:
                raise SessionExistsError(f"session already exists: {fresh.session_id!r}")
            app, user = self._scoped_state(conn, app_name, user_id)
            # The state it starts from, before its first events (mnemoray.compiler.replay).
            created = to_json(
                merged_state({**app, **delta.app}, {**user, **delta.user}, delta.session), "state"
            )
            conn.execute(
                f"UPDATE sessions SET created_state = %s WHERE {_KEY}",
                (created, *fresh.key),
            )
            self._write_scoped(conn, app_name, user_id, app_rows, user_rows)
            own = dict(delta.session)
            if first:  # the first events in the same transaction: all there, or no session
                own = self._insert_events(conn, fresh, first, prepared)
            app, user = self._scoped_state(conn, app_name, user_id)
        fresh.events = first
        fresh.version = len(first)
        fresh.updated_at = max([fresh.updated_at, *(e.timestamp for e in first)])
        fresh.state = merged_state(app, user, own)
        return fresh

    def get_session(self, app_name: str, user_id: str, session_id: str) -> Session:
        key = (app_name, user_id, session_id)
        # REPEATABLE READ: the session row, its events and the scoped state from one
        # snapshot, as one SQLite read transaction sees them.
        with self._tx() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = conn.execute(
                "SELECT state, created_at, updated_at, ended_at, version "
                f"FROM sessions WHERE {_KEY}",
                key,
            ).fetchone()
            if row is None:
                raise SessionNotFoundError(*key)
            bodies = conn.execute(
                f"SELECT body FROM events WHERE {_KEY} ORDER BY seq", key
            ).fetchall()
            app, user = self._scoped_state(conn, app_name, user_id)
        state_json, created_at, updated_at, ended_at, version = row
        return Session(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            state=merged_state(app, user, json.loads(state_json)),
            events=[Event.from_dict(json.loads(body)) for (body,) in bodies],
            created_at=created_at,
            updated_at=updated_at,
            ended_at=ended_at,
            version=version,
        )

    def created_state(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any] | None:
        key = (app_name, user_id, session_id)
        with self._tx() as conn:
            row = conn.execute(f"SELECT created_state FROM sessions WHERE {_KEY}", key).fetchone()
        if row is None:
            raise SessionNotFoundError(*key)
        return None if row[0] is None else json.loads(row[0])

    def list_sessions(self, app_name: str, user_id: str | None = None) -> list[SessionInfo]:
        query = (
            "SELECT app_name, user_id, session_id, created_at, updated_at, ended_at, "
            "version FROM sessions WHERE app_name = %s"
        )
        params: tuple[str, ...] = (app_name,)
        if user_id is not None:
            query += " AND user_id = %s"
            params += (user_id,)
        with self._tx() as conn:
            rows = conn.execute(query + " ORDER BY created_seq", params).fetchall()
        return [SessionInfo(*row) for row in rows]

    def list_apps(self) -> list[str]:
        with self._tx() as conn:
            return [row[0] for row in conn.execute(_APPS)]

    def app_users(
        self, apps: Collection[str] | None = None, limit: int | None = None
    ) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._tx() as conn:
            names = [r[0] for r in conn.execute(_APPS)] if apps is None else sorted(set(apps))
            for app in names:
                users = [
                    r[0]
                    for r in conn.execute(
                        "SELECT DISTINCT user_id FROM sessions WHERE app_name = %s "
                        "ORDER BY user_id LIMIT %s",
                        (app, limit),  # LIMIT NULL: no limit
                    )
                ]
                if users:
                    out[app] = users
        return out

    def _append_many(self, session: Session, events: list[Event]) -> None:
        # Serialize before the transaction: a bad value fails with nothing written.
        prepared = Prepared.of(events)
        # One transaction for the whole request: any failure rolls every event back.
        with self._tx() as conn:
            self._insert_events(conn, session, events, prepared)

    def _insert_events(
        self, conn: Any, session: Session, events: list[Event], prepared: Prepared
    ) -> dict[str, Any]:
        """Write ``events`` after ``session.version`` inside the caller's transaction;
        the session's own (session-scoped) state after them."""
        # The row lock orders concurrent appenders; each reads the version the one
        # before it committed.
        row = conn.execute(
            f"SELECT version, state, updated_at, ended_at FROM sessions WHERE {_KEY} FOR UPDATE",
            session.key,
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(*session.key)
        version, state_json, updated_at, ended_at = row
        if version != session.version:
            raise StaleSessionError(
                f"session {session.session_id!r} is at version {version}, "
                f"this copy at {session.version}: reload and retry"
            )
        if ended_at is not None:  # ended through another copy: this one cannot know
            raise SessionEndedError(f"session {session.session_id!r} has ended")
        ids = [e.id for e in events]
        # Checked under the row lock, so the UNIQUE constraint never fires mid-insert.
        seen = {
            r[0]
            for r in conn.execute(
                f"SELECT event_id FROM events WHERE {_KEY} AND event_id = ANY(%s)",
                (*session.key, ids),
            )
        }
        for event_id in ids:
            if event_id in seen:
                raise DuplicateEventError(
                    f"event id {event_id!r} already in session {session.session_id!r}"
                )
            seen.add(event_id)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO events (app_name, user_id, session_id, seq, event_id, "
                "body) VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    (*session.key, seq, event.id, body)
                    for seq, (event, body) in enumerate(
                        zip(events, prepared.bodies, strict=True), version
                    )
                ],
            )
        state = json.loads(state_json)
        for event in events:
            state.update(split_delta(event.state_delta).session)
        self._write_scoped(
            conn, session.app_name, session.user_id, prepared.app_rows, prepared.user_rows
        )
        conn.execute(
            f"UPDATE sessions SET state = %s, updated_at = %s, version = %s WHERE {_KEY}",
            (
                to_json(state, "state"),
                max([updated_at, *(e.timestamp for e in events)]),
                version + len(events),
                *session.key,
            ),
        )
        return state

    def _end(self, session: Session, ended_at: float) -> None:
        with self._tx() as conn:
            cursor = conn.execute(
                f"UPDATE sessions SET ended_at = %s WHERE {_KEY}",
                (ended_at, *session.key),
            )
            if cursor.rowcount == 0:
                raise SessionNotFoundError(*session.key)

    def _delete(self, app_name: str, user_id: str, session_id: str) -> None:
        key = (app_name, user_id, session_id)
        with self._tx() as conn:  # its events go with it (ON DELETE CASCADE)
            if conn.execute(f"DELETE FROM sessions WHERE {_KEY}", key).rowcount == 0:
                raise SessionNotFoundError(*key)
