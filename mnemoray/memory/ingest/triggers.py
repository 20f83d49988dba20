"""When sessions become memories: ingestion triggers.

Three trigger types, as in ``MemoryTriggerConfig``:

- ``session_end``: a session is ingested when it ends;
- ``inactivity``: a session that has not changed for ``inactivity_s`` (and
  changed since it was last ingested) is ingested by :meth:`IngestionTrigger.poll`,
  called by hand or by the :meth:`IngestionTrigger.start_background` thread;
- ``message_count``: a session is ingested every ``message_count`` new
  user/model messages (:meth:`IngestionTrigger.on_event`, called for you on
  each append once the trigger is attached to a store).

Whatever the type, an ended session is always ingested (so memory holds the
complete session), and a deleted session's memories are forgotten.

The ingest contract
-------------------
``ingest(session)`` receives the *whole* session each time, never a delta,
and may be called several times for one session as it grows (and again when
it ends). It must therefore be idempotent: records whose content hash is
already stored are not added twice (chunk windows are aligned to the start
of the session, so earlier full windows come out identical). It is also
responsible for replacing what a longer session supersedes: the previous
``session_summary``, facts whose provenance grew, the last (partial) chunk.
:func:`mnemoray.memory.records.distill.distill_session` output is the set of records
the session should now have; ``ingest`` adds the missing ones and forgets this
session's records that are not in it. A copy older than the one already
ingested (fewer events, or as many and an earlier ``updated_at``: another
replica's stale copy) must replace nothing; ``MemoryService.add_session``
checks the versions its records carry. ``forget_session(app_name, user_id,
session_id)`` removes every record of a session.

A failing ``ingest`` or ``forget_session`` never breaks the session write
that triggered it: the error goes to ``on_error`` (default: logged) and the
session stays due, so the next trigger retries it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from mnemoray.errors import InvalidInput
from mnemoray.memory.records.windows import is_turn
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore
from mnemoray.sessions.types import SessionNotFoundError, SessionNotice

log = logging.getLogger(__name__)

TriggerType = Literal["session_end", "inactivity", "message_count"]
TRIGGER_TYPES: tuple[str, ...] = get_args(TriggerType)
SessionKey = tuple[str, str, str]

Ingest = Callable[[Session], object]
ForgetSession = Callable[[str, str, str], object]
ErrorHandler = Callable[[BaseException, SessionKey], object]


@dataclass(frozen=True)
class TriggerConfig:
    """``type``: when to ingest; ``inactivity_s``: idle seconds before an
    inactive session is ingested; ``message_count``: new user/model messages
    between ingestions; ``app_names``: the apps :meth:`IngestionTrigger.poll`
    scans when it is not told (else the apps the trigger has seen)."""

    type: TriggerType = "session_end"
    inactivity_s: float = 1800.0
    message_count: int = 20
    app_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.type not in TRIGGER_TYPES:
            raise InvalidInput(
                f"{self.type!r} is not one of {', '.join(TRIGGER_TYPES)}",
                field="TriggerConfig.type",
            )
        if (
            isinstance(self.inactivity_s, bool)
            or not isinstance(self.inactivity_s, (int, float))
            or self.inactivity_s < 0
        ):
            raise InvalidInput(
                f"must be a number >= 0, got {self.inactivity_s!r}",
                field="TriggerConfig.inactivity_s",
            )
        if (
            isinstance(self.message_count, bool)
            or not isinstance(self.message_count, int)
            or self.message_count < 1
        ):
            raise InvalidInput(
                f"must be an int >= 1, got {self.message_count!r}",
                field="TriggerConfig.message_count",
            )
        if isinstance(self.app_names, str):
            raise InvalidInput(
                "expected a list of app names, got a single string", field="TriggerConfig.app_names"
            )
        object.__setattr__(self, "app_names", tuple(self.app_names))


@dataclass(frozen=True)
class _Mark:
    """What was last ingested of one session."""

    num_events: int
    messages: int
    at: float


def _count_messages(session: Session) -> int:
    return sum(1 for e in session.events if is_turn(e))


class IngestionTrigger:
    """Calls ``ingest`` when the configured trigger fires (see module docstring).

    Thread-safe: notices (from any thread appending to or ending sessions),
    :meth:`poll` and the background thread may run at once; one session is
    never ingested by two threads at the same time.
    """

    def __init__(
        self,
        config: TriggerConfig,
        ingest: Ingest,
        forget_session: ForgetSession | None = None,
        *,
        on_error: ErrorHandler | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(config, TriggerConfig):
            raise TypeError(f"config: expected TriggerConfig, got {type(config).__name__}")
        if not callable(ingest):
            raise TypeError("ingest: must be callable (session) -> object")
        if forget_session is not None and not callable(forget_session):
            raise TypeError("forget_session: must be callable (app_name, user_id, session_id)")
        self.config = config
        self._ingest_fn = ingest
        self._forget_fn = forget_session
        self._on_error = on_error
        self._clock = clock
        self._lock = threading.Lock()
        self._marks: dict[SessionKey, _Mark] = {}
        self._key_locks: dict[SessionKey, threading.Lock] = {}
        self._apps: dict[str, None] = dict.fromkeys(config.app_names)
        self._attached: list[tuple[SessionStore, Callable[[SessionNotice], None]]] = []
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- wiring ------------------------------------------------------------
    def attach(self, store: SessionStore) -> IngestionTrigger:
        """Listen to ``store``: ended -> ingest, deleted -> forget, and for
        ``message_count`` each append -> :meth:`on_event`."""
        changes: tuple[Literal["ended", "deleted", "appended"], ...] = ("ended", "deleted")
        if self.config.type in ("message_count", "inactivity"):
            # inactivity only notes which apps are live, so poll() finds them.
            changes += ("appended",)
        if any(s is store for s, _ in self._attached):
            return self

        def listener(notice: SessionNotice) -> None:
            self._on_notice(store, notice)

        store.add_listener(listener, changes)
        self._attached.append((store, listener))
        return self

    def detach(self, store: SessionStore) -> None:
        """Stop listening to ``store``."""
        for s, listener in [(s, f) for s, f in self._attached if s is store]:
            s.remove_listener(listener)
        self._attached = [(s, f) for s, f in self._attached if s is not store]

    def _on_notice(self, store: SessionStore, notice: SessionNotice) -> None:
        with self._lock:
            self._apps.setdefault(notice.app_name, None)
        if notice.change == "ended" and notice.session is not None:
            session = notice.session
            # The ender's copy may miss events appended through another copy.
            with contextlib.suppress(SessionNotFoundError):
                session = store.get_session(*session.key)
            self.ingest(session, force=True)
        elif notice.change == "deleted":
            self.forget(notice.app_name, notice.user_id, notice.session_id)
        elif (
            notice.change == "appended"
            and notice.session is not None
            and self.config.type == "message_count"
        ):
            self.on_event(notice.session)

    # -- triggers --------------------------------------------------------------
    def on_event(self, session: Session) -> bool:
        """After an event was added: ingest if ``message_count`` new user/model
        messages arrived since the last ingestion. True if it ingested."""
        if self.config.type != "message_count":
            return False
        messages = _count_messages(session)
        with self._lock:
            mark = self._marks.get(session.key)
        if messages - (mark.messages if mark else 0) < self.config.message_count:
            return False
        return self.ingest(session)

    def poll(
        self,
        store: SessionStore,
        now: float | None = None,
        *,
        app_names: Iterable[str] | None = None,
    ) -> list[SessionKey]:
        """Ingest the sessions idle for ``inactivity_s`` that changed since their
        last ingestion (ended sessions are left to the "ended" notice).

        Scans ``app_names``, else ``config.app_names`` plus every app this
        trigger has seen a notice for. Returns the keys it ingested.
        """
        now = self._clock() if now is None else now
        if app_names is None:
            with self._lock:
                apps = list(self._apps)
        else:
            if isinstance(app_names, str):
                raise TypeError("app_names: expected a list of app names, got a single string")
            apps = list(dict.fromkeys(app_names))
        done: list[SessionKey] = []
        for app in apps:
            for info in store.list_sessions(app):
                key = (info.app_name, info.user_id, info.session_id)
                if info.ended_at is not None or info.num_events == 0:
                    continue
                if now - info.updated_at < self.config.inactivity_s:
                    continue
                with self._lock:
                    mark = self._marks.get(key)
                if mark is not None and mark.num_events >= info.num_events:
                    continue  # unchanged since it was ingested
                try:
                    session = store.get_session(*key)
                except SessionNotFoundError:
                    continue  # deleted meanwhile
                if session.ended:
                    continue
                if self.ingest(session):
                    done.append(key)
        return done

    # -- actions ------------------------------------------------------------------
    def ingest(self, session: Session, *, force: bool = False) -> bool:
        """Ingest ``session`` now unless this copy is not newer than what was
        ingested (``force``: ingest anyway). True if ``ingest`` ran and succeeded."""
        key = session.key
        num_events = len(session.events)
        with self._key_lock(key):
            with self._lock:
                mark = self._marks.get(key)
            if not force and mark is not None and mark.num_events >= num_events:
                return False
            try:
                self._ingest_fn(session)
            except Exception as exc:  # reported, and the session stays due
                self._report(exc, key, "ingest")
                return False
            with self._lock:
                self._apps.setdefault(session.app_name, None)
                self._marks[key] = _Mark(num_events, _count_messages(session), self._clock())
            return True

    def forget(self, app_name: str, user_id: str, session_id: str) -> bool:
        """Forget a session's memories (called on "deleted"). True on success."""
        key = (app_name, user_id, session_id)
        with self._key_lock(key):
            with self._lock:
                self._marks.pop(key, None)
            if self._forget_fn is None:
                return False
            try:
                self._forget_fn(app_name, user_id, session_id)
            except Exception as exc:  # reported, never breaks the delete
                self._report(exc, key, "forget")
                return False
        with self._lock:
            self._key_locks.pop(key, None)
        return True

    def last_ingested(self, app_name: str, user_id: str, session_id: str) -> float | None:
        """When the session was last ingested by this trigger (clock time), or None."""
        with self._lock:
            mark = self._marks.get((app_name, user_id, session_id))
        return None if mark is None else mark.at

    # -- background runner -----------------------------------------------------
    def start_background(
        self,
        store: SessionStore,
        interval_s: float = 60.0,
        *,
        app_names: Iterable[str] | None = None,
    ) -> threading.Thread:
        """Run :meth:`poll` every ``interval_s`` in a daemon thread (servers)."""
        if (
            isinstance(interval_s, bool)
            or not isinstance(interval_s, (int, float))
            or interval_s <= 0
        ):
            raise InvalidInput(f"must be a positive number, got {interval_s!r}", field="interval_s")
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("the background poller is already running; stop() it first")
        apps = None if app_names is None else list(app_names)
        self._stopping.clear()

        def run() -> None:
            while not self._stopping.is_set():
                try:
                    self.poll(store, app_names=apps)
                except Exception:  # a store hiccup must not kill the poller
                    log.exception("ingestion trigger: poll failed")
                self._stopping.wait(interval_s)

        self._thread = threading.Thread(target=run, name="mnemoray-ingestion-trigger", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the background poller (waits for a poll in progress)."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # -- internals --------------------------------------------------------------
    def _key_lock(self, key: SessionKey) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _report(self, exc: Exception, key: SessionKey, action: str) -> None:
        if self._on_error is not None:
            try:
                self._on_error(exc, key)
                return
            except Exception:
                log.exception("ingestion trigger: on_error handler failed")
        log.error("ingestion trigger: %s failed for session %s/%s/%s", action, *key, exc_info=exc)
