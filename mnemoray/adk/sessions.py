"""Google ADK adapter: mnemoray's :class:`~mnemoray.sessions.store.SessionStore` behind
ADK's ``BaseSessionService``.

    sessions = MnemoraySessionService(SQLiteSessionStore("STORE/sessions.db"))
    # or MnemoraySessionService(uri="mnemoray:///STORE"): the file ``mnemoray serve`` uses

ADK's sessions then live where mnemoray's compaction, context compiler, HTTP API
and memory ingestion see them. State keeps ADK's scopes (``app:``, ``user:``,
session; ``temp:`` never persisted), and appends keep the store's optimistic
concurrency: a copy that fell behind another writer gets ADK's
``StaleSessionError`` instead of overwriting it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from google.adk.errors import StaleSessionError as AdkStaleSessionError
from google.adk.events.event import Event as AdkEvent
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session as AdkSession
from typing_extensions import override

from mnemoray.adk.events import to_adk, to_store
from mnemoray.adk.uri import given_or_from_uri
from mnemoray.errors import NotFound
from mnemoray.sessions.session import Session
from mnemoray.sessions.state import USER_PREFIX
from mnemoray.sessions.store import SessionStore
from mnemoray.sessions.types import StaleSessionError, only_compactions_since

T = TypeVar("T")
_CACHED = 256  # sessions whose last copy is kept between appends


class StaleAdkSessionError(StaleSessionError, AdkStaleSessionError):
    """The ADK session copy is behind the store (another writer appended): reload it.
    Both mnemoray's and ADK's StaleSessionError, so either ``except`` catches it."""


class MnemoraySessionService(BaseSessionService):
    """ADK session service over a mnemoray session store.

    ``store``: any :class:`SessionStore` (in-memory, SQLite); or ``uri`` (see
    :func:`mnemoray.adk.uri.parse_uri`). ``offload``: run store calls in a worker
    thread so a SQLite write does not block the agent's event loop.
    """

    def __init__(
        self,
        store: SessionStore | None = None,
        *,
        uri: str | None = None,
        agents_dir: str | None = None,
        offload: bool = True,
    ) -> None:
        store = given_or_from_uri(
            store, uri, agents_dir, "SessionStore", lambda target: target.session_store()
        )
        if not isinstance(store, SessionStore):
            raise TypeError(f"store: expected a SessionStore, got {type(store).__name__}")
        self.store = store
        self.offload = offload
        # The store's copy of each recently used session, so an append from the
        # copy ADK holds needs no reload (the store still checks its version).
        self._copies: OrderedDict[tuple[str, str, str], Session] = OrderedDict()
        self._lock = threading.Lock()  # appends run in worker threads

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args) if self.offload else fn(*args)

    def _keep(self, session: Session) -> None:
        with self._lock:
            self._copies[session.key] = session
            self._copies.move_to_end(session.key)
            while len(self._copies) > _CACHED:
                self._copies.popitem(last=False)

    def _drop(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            self._copies.pop(key, None)

    def _to_adk(self, session: Session, config: GetSessionConfig | None = None) -> AdkSession:
        self._keep(session)
        events = session.events
        if config is not None and config.after_timestamp is not None:
            events = [e for e in events if e.timestamp >= config.after_timestamp]
        adk_events = to_adk(events)
        if config is not None and config.num_recent_events is not None:
            n = config.num_recent_events
            adk_events = adk_events[-n:] if n else []
        out = AdkSession(
            id=session.session_id,
            app_name=session.app_name,
            user_id=session.user_id,
            state=dict(session.state),
            events=adk_events,
            last_update_time=session.updated_at,
        )
        # The store version this copy was read at: what the next append is checked against.
        out._storage_update_marker = str(session.version)
        return out

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        created = await self._run(self.store.create_session, app_name, user_id, session_id, state)
        return self._to_adk(created)

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        try:
            stored = await self._run(self.store.get_session, app_name, user_id, session_id)
        except NotFound:
            return None
        return self._to_adk(stored, config)

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """Sessions without events or state (as ADK lists them), oldest update first."""
        infos = await self._run(self.store.list_sessions, app_name, user_id)
        infos = sorted(infos, key=lambda i: (i.updated_at, i.session_id))
        return ListSessionsResponse(
            sessions=[
                AdkSession(
                    id=i.session_id,
                    app_name=i.app_name,
                    user_id=i.user_id,
                    last_update_time=i.updated_at,
                )
                for i in infos
            ]
        )

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session (nothing to do when there is none, as in ADK's services)."""
        self._drop((app_name, user_id, session_id))
        try:
            await self._run(self.store.delete_session, app_name, user_id, session_id)
        except NotFound:
            return

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` state, keys without the prefix; {} for a user with no
        session (the store keeps user state beside sessions and shows it through one)."""
        infos = await self._run(self.store.list_sessions, app_name, user_id)
        if not infos:
            return {}
        latest = max(infos, key=lambda i: i.updated_at)
        try:
            session = await self._run(self.store.get_session, app_name, user_id, latest.session_id)
        except NotFound:  # deleted meanwhile
            return {}
        return {
            k[len(USER_PREFIX) :]: v for k, v in session.state.items() if k.startswith(USER_PREFIX)
        }

    def _stored_copy(self, adk: AdkSession) -> Session:
        """The store's copy at the version ``adk`` was read at (blocking)."""
        key = (adk.app_name, adk.user_id, adk.id)
        marker = adk._storage_update_marker
        version = int(marker) if marker is not None and marker.isdigit() else -1
        with self._lock:
            cached = self._copies.get(key)
        if cached is not None and cached.version == version:
            return cached
        fresh = self.store.get_session(*key)
        # A session object not read through this service (built by hand) carries no
        # version: nothing to check it against, it appends to the current copy.
        # Compactions landing since are summaries, never conflicts (the store's rule).
        if version >= 0 and not only_compactions_since(fresh, version):
            raise StaleAdkSessionError(
                f"session {adk.id!r} changed since this copy was read (store version "
                f"{fresh.version}, copy at {version}): reload it with get_session"
            )
        return fresh

    def _append(self, adk: AdkSession, event: AdkEvent) -> int:
        stored = self._stored_copy(adk)
        try:
            self.store.append_events(stored, to_store(event, len(adk.events)))
        except StaleSessionError as exc:
            self._drop(stored.key)
            raise StaleAdkSessionError(str(exc)) from exc
        self._keep(stored)
        return stored.version

    @override
    async def append_event(self, session: AdkSession, event: AdkEvent) -> AdkEvent:
        """Persist ``event`` (all or nothing), then update ``session`` as ADK does:
        state delta applied (``temp:`` keys to this copy only), event appended."""
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        version = await self._run(self._append, session, event)
        self._commit_event_to_session(session, event)
        session.last_update_time = max(session.last_update_time, event.timestamp)
        session._storage_update_marker = str(version)
        return event


__all__ = ["MnemoraySessionService", "StaleAdkSessionError"]
