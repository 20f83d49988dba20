"""SQLite session store: the embedded default.

One file holds sessions, their events and the ``app:``/``user:`` state.
Appends are optimistic: each runs in one ``BEGIN IMMEDIATE`` transaction that
checks the stored version against the caller's copy, so concurrent writers in
other threads or other processes on the same file get
:class:`StaleSessionError` instead of losing an event. WAL mode lets readers
proceed while one writer commits; ``busy_timeout`` makes writers queue for
the file lock instead of failing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.locations import local_location
from mnemoray.sessions.events import Event
from mnemoray.sessions.serialized import Prepared, to_json
from mnemoray.sessions.session import Session
from mnemoray.sessions.sqlite.rows import MIGRATIONS, SCHEMA, SCHEMA_VERSION
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

#: What a session location may be, for the message that refuses any other.
SUPPORTED = "a file path (SQLite) or :memory:"

_KEY = "app_name = ? AND user_id = ? AND session_id = ?"
_APPS = "SELECT DISTINCT app_name FROM sessions ORDER BY app_name"


class _Connection(sqlite3.Connection):
    """A plain connection that admits weak references (the base class does not)."""


class SQLiteSessionStore(SessionStore):
    """Sessions in one SQLite file (or ``":memory:"``).

    File databases use one connection per thread, so threads never share a
    transaction; ``":memory:"`` exists only inside its connection, so there all
    threads share one connection, serialized by a lock.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        super().__init__()
        # A URL (postgresql://...) would silently become a file of that name.
        self.path = local_location(path, field="path", supported=SUPPORTED)
        if not self.path:  # SQLite would make a private temp database per connection
            raise InvalidInput(f"empty; give {SUPPORTED}", field="path")
        self._in_memory = self.path == ":memory:"
        self._busy_timeout_s = busy_timeout_s
        self._inherited: list[sqlite3.Connection | None] = []
        if not self._in_memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._reset_connections()
        self._closed = False
        self._init_schema()

    # -- connections -----------------------------------------------------
    def _reset_connections(self) -> None:
        self._pid = os.getpid()
        self._registry_lock = threading.Lock()
        self._local = threading.local()
        self._open_conns: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._memory_lock = threading.RLock()
        self._memory_conn = self._open() if self._in_memory else None

    def _open(self) -> _Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            factory=_Connection,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        with self._registry_lock:
            self._open_conns.add(conn)
        return conn

    def _connection(self) -> tuple[sqlite3.Connection, AbstractContextManager[Any]]:
        if self._closed:
            raise RuntimeError(f"SQLiteSessionStore({self.path!r}) is closed")
        if self._memory_conn is not None:
            return self._memory_conn, self._memory_lock
        if self._pid != os.getpid():
            # A forked child must neither use nor close its parent's connections (SQLite
            # forbids carrying them across fork): keep them referenced, open fresh ones.
            self._inherited = [*self._open_conns, getattr(self._local, "conn", None)]
            self._reset_connections()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # Dropped with the thread-local when its thread ends, which closes it.
            conn = self._local.conn = self._open()
        return conn, nullcontext()

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction. Writers take the file's write lock up front
        (BEGIN IMMEDIATE), so a read-then-write never fails half way on a
        lock upgrade; readers get a consistent snapshot across statements."""
        conn, guard = self._connection()
        with guard:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # never leave the connection inside a transaction
                    conn.execute("ROLLBACK")
                raise

    def _init_schema(self) -> None:
        conn, guard = self._connection()
        with guard:
            if not self._in_memory:
                # Persistent property of the file; a no-op once set.
                conn.execute("PRAGMA journal_mode = WAL")
        with self._tx(write=True) as conn:
            found = conn.execute("PRAGMA user_version").fetchone()[0]
            if not 0 <= found <= SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path}: session store schema version {found}, "
                    f"this mnemoray reads versions up to {SCHEMA_VERSION}"
                )
            if found == 0:
                for statement in SCHEMA:
                    conn.execute(statement)
            else:  # an older file, brought up to date in this transaction: every step or none
                for version in range(found, SCHEMA_VERSION):
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        self._closed = True
        with self._registry_lock:
            conns = list(self._open_conns)
            self._open_conns = weakref.WeakSet()
        for conn in conns:
            conn.close()

    def __enter__(self) -> SQLiteSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scoped state ------------------------------------------------------
    @staticmethod
    def _scoped_state(
        conn: sqlite3.Connection, app_name: str, user_id: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        app = {
            k: json.loads(v)
            for k, v in conn.execute(
                "SELECT key, value FROM app_state WHERE app_name = ?", (app_name,)
            )
        }
        user = {
            k: json.loads(v)
            for k, v in conn.execute(
                "SELECT key, value FROM user_state WHERE app_name = ? AND user_id = ?",
                (app_name, user_id),
            )
        }
        return app, user

    @staticmethod
    def _write_scoped(
        conn: sqlite3.Connection,
        app_name: str,
        user_id: str,
        app_rows: dict[str, str],
        user_rows: dict[str, str],
    ) -> None:
        conn.executemany(
            "INSERT INTO app_state (app_name, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (app_name, key) DO UPDATE SET value = excluded.value",
            [(app_name, k, v) for k, v in app_rows.items()],
        )
        conn.executemany(
            "INSERT INTO user_state (app_name, user_id, key, value) VALUES (?, ?, ?, ?) "
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
        with self._tx(write=True) as conn:
            app, user = self._scoped_state(conn, app_name, user_id)
            # The state it starts from, before its first events (mnemoray.compiler.replay).
            created = to_json(
                merged_state({**app, **delta.app}, {**user, **delta.user}, delta.session), "state"
            )
            try:
                conn.execute(
                    "INSERT INTO sessions (app_name, user_id, session_id, state, created_at, "
                    "updated_at, ended_at, version, created_state) "
                    "VALUES (?, ?, ?, ?, ?, ?, NULL, 0, ?)",
                    (*fresh.key, session_json, fresh.created_at, fresh.updated_at, created),
                )
            except sqlite3.IntegrityError as exc:
                raise SessionExistsError(f"session already exists: {fresh.session_id!r}") from exc
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
        with self._tx(write=False) as conn:
            row = conn.execute(
                f"SELECT state, created_at, updated_at, ended_at, version FROM sessions "
                f"WHERE {_KEY}",
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
        with self._tx(write=False) as conn:
            row = conn.execute(f"SELECT created_state FROM sessions WHERE {_KEY}", key).fetchone()
        if row is None:
            raise SessionNotFoundError(*key)
        return None if row[0] is None else json.loads(row[0])

    def list_sessions(self, app_name: str, user_id: str | None = None) -> list[SessionInfo]:
        query = (
            "SELECT app_name, user_id, session_id, created_at, updated_at, ended_at, "
            "version FROM sessions WHERE app_name = ?"
        )
        params: tuple[str, ...] = (app_name,)
        if user_id is not None:
            query += " AND user_id = ?"
            params += (user_id,)
        with self._tx(write=False) as conn:
            # rowid order = creation order, as the in-memory store lists them.
            rows = conn.execute(query + " ORDER BY rowid", params).fetchall()
        return [SessionInfo(*row) for row in rows]

    def list_apps(self) -> list[str]:
        with self._tx(write=False) as conn:
            return [row[0] for row in conn.execute(_APPS)]

    def app_users(
        self, apps: Collection[str] | None = None, limit: int | None = None
    ) -> dict[str, list[str]]:
        # DISTINCT over the primary key's (app_name, user_id) prefix: an index walk that
        # skips each user's sessions, one app at a time so ``limit`` bounds every app.
        out: dict[str, list[str]] = {}
        with self._tx(write=False) as conn:
            names = [r[0] for r in conn.execute(_APPS)] if apps is None else sorted(set(apps))
            for app in names:
                users = [
                    r[0]
                    for r in conn.execute(
                        "SELECT DISTINCT user_id FROM sessions WHERE app_name = ? "
                        "ORDER BY user_id LIMIT ?",
                        (app, -1 if limit is None else limit),
                    )
                ]
                if users:
                    out[app] = users
        return out

    def _append_many(self, session: Session, events: list[Event]) -> None:
        # Serialize before the transaction: a bad value fails with nothing written.
        prepared = Prepared.of(events)
        # One transaction for the whole request: any failure rolls every event back.
        with self._tx(write=True) as conn:
            self._insert_events(conn, session, events, prepared)

    def _insert_events(
        self, conn: sqlite3.Connection, session: Session, events: list[Event], prepared: Prepared
    ) -> dict[str, Any]:
        """Write ``events`` after ``session.version`` inside the caller's transaction;
        the session's own (session-scoped) state after them."""
        row = conn.execute(
            f"SELECT version, state, updated_at, ended_at FROM sessions WHERE {_KEY}", session.key
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
        for seq, (event, body) in enumerate(zip(events, prepared.bodies, strict=True), version):
            try:
                conn.execute(
                    "INSERT INTO events (app_name, user_id, session_id, seq, event_id, "
                    "body) VALUES (?, ?, ?, ?, ?, ?)",
                    (*session.key, seq, event.id, body),
                )
            except sqlite3.IntegrityError as exc:
                raise DuplicateEventError(
                    f"event id {event.id!r} already in session {session.session_id!r}"
                ) from exc
        state = json.loads(state_json)
        for event in events:
            state.update(split_delta(event.state_delta).session)
        self._write_scoped(
            conn, session.app_name, session.user_id, prepared.app_rows, prepared.user_rows
        )
        conn.execute(
            f"UPDATE sessions SET state = ?, updated_at = ?, version = ? WHERE {_KEY}",
            (
                to_json(state, "state"),
                max([updated_at, *(e.timestamp for e in events)]),
                version + len(events),
                *session.key,
            ),
        )
        return state

    def _end(self, session: Session, ended_at: float) -> None:
        with self._tx(write=True) as conn:
            cursor = conn.execute(
                f"UPDATE sessions SET ended_at = ? WHERE {_KEY}", (ended_at, *session.key)
            )
            if cursor.rowcount == 0:
                raise SessionNotFoundError(*session.key)

    def _delete(self, app_name: str, user_id: str, session_id: str) -> None:
        key = (app_name, user_id, session_id)
        with self._tx(write=True) as conn:
            conn.execute(f"DELETE FROM events WHERE {_KEY}", key)
            if conn.execute(f"DELETE FROM sessions WHERE {_KEY}", key).rowcount == 0:
                raise SessionNotFoundError(*key)
