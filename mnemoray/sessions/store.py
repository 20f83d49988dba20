"""The SessionStore interface and its in-memory implementation.

Stores persist sessions, their events and the ``app:``/``user:`` state
shared across sessions. Appends use optimistic concurrency: a writer whose
copy of the session is stale gets :class:`StaleSessionError` and must reload;
an event is never lost or silently overwritten.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any, get_args

from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.sessions.state import merged_state, persisted_event, split_delta, without_temp
from mnemoray.sessions.types import (
    CATCH_UP_TRIES,
    DEFAULT_CHANGES,
    DuplicateEventError,
    Listener,
    SessionChange,
    SessionEndedError,
    SessionExistsError,
    SessionInfo,
    SessionNotFoundError,
    SessionNotice,
    StaleSessionError,
    initial_events,
    initial_state,
    only_compactions_since,
)

log = logging.getLogger(__name__)


class SessionStore(ABC):
    """Durable sessions. Implementations: in-memory, SQLite."""

    def __init__(self) -> None:
        self._listeners: list[tuple[Listener, frozenset[str]]] = []

    # -- listeners ---------------------------------------------------------
    def add_listener(
        self, listener: Listener, changes: Iterable[SessionChange] = DEFAULT_CHANGES
    ) -> None:
        """Called after a session is ended or deleted (memory ingestion, forget).

        ``changes`` selects the notices; "appended" (once per successful
        ``append_event(s)`` call, in the appending thread) is opt-in.
        """
        wanted = frozenset(changes)
        unknown = wanted - set(get_args(SessionChange))
        if unknown:
            raise InvalidInput(f"unknown session change {sorted(unknown)[0]!r}", field="changes")
        self._listeners.append((listener, wanted))

    def remove_listener(self, listener: Listener) -> None:
        """Stop notifying ``listener`` (no error if it was not registered)."""
        self._listeners = [(f, c) for f, c in self._listeners if f != listener]

    def _notify(self, notice: SessionNotice) -> None:
        """Tell the listeners about a change that is already durable: a listener's failure
        is logged, never raised into the caller (who would report a stored append as
        failed, and retry it)."""
        for listener, changes in list(self._listeners):
            if notice.change in changes:
                try:
                    listener(notice)
                except Exception:
                    log.exception(
                        "session %s listener failed for %s/%s/%s",
                        notice.change,
                        notice.app_name,
                        notice.user_id,
                        notice.session_id,
                    )

    def close(self) -> None:
        """Release what the store holds open (connections); the in-memory store holds
        nothing. A closed durable store refuses further use."""
        return None  # nothing to release here

    # -- API -----------------------------------------------------------------
    @abstractmethod
    def create_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
        *,
        events: Sequence[Event] = (),
    ) -> Session:
        """A new session; ``events`` (e.g. its compaction policy) are its first events,
        written in the same transaction: the session exists with all of them or not at
        all. Raises SessionExistsError."""

    @abstractmethod
    def get_session(self, app_name: str, user_id: str, session_id: str) -> Session:
        """Raises SessionNotFoundError."""

    @abstractmethod
    def created_state(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any] | None:
        """The state (all scopes but ``temp:``) the session had when it was created, before
        its first events: what a replay of an earlier turn rewinds to
        (:mod:`mnemoray.compiler.replay`). None for a session stored before the store kept
        it. Raises SessionNotFoundError."""

    @abstractmethod
    def list_sessions(self, app_name: str, user_id: str | None = None) -> list[SessionInfo]: ...

    @abstractmethod
    def list_apps(self) -> list[str]:
        """The apps with at least one session, sorted."""

    def app_users(
        self, apps: Collection[str] | None = None, limit: int | None = None
    ) -> dict[str, list[str]]:
        """app -> the distinct users with sessions in it, sorted, the first ``limit`` of
        each; only ``apps`` when given (None: every app with sessions). A store that can
        ask for distinct pairs (SQLite) answers without reading each session."""
        names = self.list_apps() if apps is None else sorted(set(apps))
        out: dict[str, list[str]] = {}
        for app in names:
            users = sorted({info.user_id for info in self.list_sessions(app)})
            if users:
                out[app] = users[:limit]
        return out

    @abstractmethod
    def _append_many(self, session: Session, events: list[Event]) -> None:
        """Persist non-partial events in one atomic step iff session.version is current:
        all of them, or (on any error: stale copy, ended session, a repeated event id,
        in the session or within ``events``) none."""

    def _append(self, session: Session, event: Event) -> None:
        self._append_many(session, [event])

    @abstractmethod
    def _end(self, session: Session, ended_at: float) -> None: ...

    @abstractmethod
    def _delete(self, app_name: str, user_id: str, session_id: str) -> None: ...

    def append_event(self, session: Session, event: Event) -> Event:
        """Append ``event`` to ``session`` and apply its state delta.

        Partial (streaming) events update nothing and are not persisted.
        ``temp:`` keys reach the caller's copy's state only: the stored event (and
        the one returned) is without them. The caller's ``session`` object is updated
        in place on success.
        """
        return self.append_events(session, [event])[0]

    def append_events(self, session: Session, events: Iterable[Event]) -> list[Event]:
        """Append ``events`` in order, all or nothing: if one cannot be persisted
        (repeated id, stale copy, ended session) none is, and ``session`` is unchanged
        (but for compaction events a copy behind only by those takes in first).
        Returns the events as stored (``temp:`` keys dropped from their deltas); partial
        (streaming) ones are returned as given, with ``partial`` set, and are neither
        persisted nor applied.
        """
        if session.ended:
            raise SessionEndedError(f"session {session.session_id!r} has ended")
        given = [replace(e, session_id=session.session_id) for e in events]
        # The one place every store's appends pass: temp: state is never written.
        out = [e if e.partial else persisted_event(e) for e in given]
        durable = [e for e in out if not e.partial]
        if not durable:
            return out
        for attempt in range(CATCH_UP_TRIES + 1):
            try:
                self._append_many(session, durable)
                break
            except StaleSessionError:
                if attempt == CATCH_UP_TRIES or not self._catch_up(session, durable):
                    raise
        for event, original in zip(out, given, strict=True):
            if not event.partial:
                session.apply(event)
                # This invocation still sees its temp: values, in this copy only.
                session.state.update(split_delta(original.state_delta).temp)
        session.version += len(durable)
        if any("appended" in changes for _, changes in self._listeners):
            # One notice per request: listeners see the session with all its new events.
            self._notify(SessionNotice("appended", *session.key, session=session))
        return out

    def _catch_up(self, session: Session, events: list[Event]) -> bool:
        """A copy stale only by (background) compaction events takes them in: a summary
        layer never conflicts with content. True if ``session`` caught up."""
        if any(e.type == "compaction" for e in events):
            return False
        fresh = self.get_session(*session.key)
        if not only_compactions_since(fresh, session.version):
            return False
        for event in fresh.events[session.version :]:
            session.apply(event)
        session.version = fresh.version
        return True

    def end_session(self, session: Session, ended_at: float | None = None) -> Session:
        if session.ended:
            return session
        ended_at = time.time() if ended_at is None else ended_at
        self._end(session, ended_at)
        session.ended_at = ended_at
        self._notify(SessionNotice("ended", *session.key, session=session))
        return session

    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, notify: bool = True
    ) -> None:
        """Delete the session and its events; raises SessionNotFoundError. ``notify``
        False: the listeners are not told (an erasure that forgot the owner's memories
        itself, so the ingestion trigger's forget of the session would only repeat it)."""
        self._delete(app_name, user_id, session_id)
        if notify:
            self._notify(SessionNotice("deleted", app_name, user_id, session_id))


class InMemorySessionStore(SessionStore):
    """A thread-safe store in process memory (tests, single-process agents)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str, str], Session] = {}
        self._app_state: dict[str, dict[str, Any]] = {}
        self._user_state: dict[tuple[str, str], dict[str, Any]] = {}
        # Every persisted event id per session: duplicates are refused, not just recent ones.
        self._event_ids: dict[tuple[str, str, str], set[str]] = {}
        self._created: dict[tuple[str, str, str], dict[str, Any]] = {}

    def _view(self, stored: Session) -> Session:
        s = copy.deepcopy(stored)
        s.state = merged_state(
            self._app_state.get(s.app_name, {}),
            self._user_state.get((s.app_name, s.user_id), {}),
            s.state,
        )
        return s

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
        with self._lock:
            if fresh.key in self._sessions:
                raise SessionExistsError(f"session already exists: {fresh.session_id!r}")
            fresh.state = dict(delta.session)
            self._app_state.setdefault(app_name, {}).update(delta.app)
            self._user_state.setdefault((app_name, user_id), {}).update(delta.user)
            self._sessions[fresh.key] = fresh
            self._event_ids[fresh.key] = set()
            self._created[fresh.key] = self._view(fresh).state  # a deep copy
            # Under the same lock: no reader sees the session without its first events.
            self._append_locked(fresh, first)
            return self._view(fresh)

    def get_session(self, app_name: str, user_id: str, session_id: str) -> Session:
        with self._lock:
            stored = self._sessions.get((app_name, user_id, session_id))
            if stored is None:
                raise SessionNotFoundError(app_name, user_id, session_id)
            return self._view(stored)

    def created_state(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        with self._lock:
            created = self._created.get((app_name, user_id, session_id))
            if created is None:
                raise SessionNotFoundError(app_name, user_id, session_id)
            return copy.deepcopy(created)

    def list_sessions(self, app_name: str, user_id: str | None = None) -> list[SessionInfo]:
        with self._lock:
            return [
                SessionInfo(
                    s.app_name,
                    s.user_id,
                    s.session_id,
                    s.created_at,
                    s.updated_at,
                    s.ended_at,
                    len(s.events),
                )
                for s in self._sessions.values()
                if s.app_name == app_name and (user_id is None or s.user_id == user_id)
            ]

    def list_apps(self) -> list[str]:
        with self._lock:
            return sorted({s.app_name for s in self._sessions.values()})

    def _append_many(self, session: Session, events: list[Event]) -> None:
        with self._lock:
            stored = self._sessions.get(session.key)
            if stored is None:
                raise SessionNotFoundError(*session.key)
            if stored.version != session.version:
                raise StaleSessionError(
                    f"session {session.session_id!r} is at version {stored.version}, "
                    f"this copy at {session.version}: reload and retry"
                )
            if stored.ended:  # ended through another copy: this one cannot know
                raise SessionEndedError(f"session {session.session_id!r} has ended")
            self._append_locked(stored, events)

    def _append_locked(self, stored: Session, events: list[Event]) -> None:
        """Append to the stored session (the lock held), all or nothing."""
        ids = self._event_ids[stored.key]
        fresh: set[str] = set()
        for event in events:  # every check before the first change: all or nothing
            if event.id in ids or event.id in fresh:
                raise DuplicateEventError(
                    f"event id {event.id!r} already in session {stored.session_id!r}"
                )
            fresh.add(event.id)
        ids.update(fresh)
        for event in events:
            delta = split_delta(event.state_delta)
            stored.events.append(event)
            stored.state.update(delta.session)
            stored.state = without_temp(stored.state)
            self._app_state.setdefault(stored.app_name, {}).update(delta.app)
            self._user_state.setdefault((stored.app_name, stored.user_id), {}).update(delta.user)
            stored.updated_at = max(stored.updated_at, event.timestamp)
        stored.version += len(events)

    def _end(self, session: Session, ended_at: float) -> None:
        with self._lock:
            stored = self._sessions.get(session.key)
            if stored is None:
                raise SessionNotFoundError(*session.key)
            stored.ended_at = ended_at

    def _delete(self, app_name: str, user_id: str, session_id: str) -> None:
        with self._lock:
            if self._sessions.pop((app_name, user_id, session_id), None) is None:
                raise SessionNotFoundError(app_name, user_id, session_id)
            del self._event_ids[(app_name, user_id, session_id)]
            del self._created[(app_name, user_id, session_id)]


# Re-exported: callers import the store and its errors from one place.
__all__ = ["InMemorySessionStore", "SessionStore"]
