"""Compaction that runs by itself, after appends and off the appender's path.

:class:`AutoCompactor` listens to a :class:`~mnemoray.sessions.store.SessionStore`
("appended" notices). A notice only queues the session (a set insert): the
append returns at once, and worker threads load a fresh copy, plan with the
session's policy (the app's :class:`~mnemoray.compaction.compactor.CompactionConfig` and
the session's own overrides, :mod:`mnemoray.compaction.policy`), summarize and
append the compaction event. A compile that arrives before it uses what is there.

Never two compactions of one window:

- one worker at a time per session: a session queued again while it is being
  compacted is marked dirty and re-run after, so bursts coalesce;
- every round plans on a fresh copy, and the append carries the copy's version:
  if anything landed meanwhile the store refuses it (StaleSessionError); after
  another compaction (another replica's) the next round re-plans, after new
  content only the same summary is appended to a fresh copy (its window is
  still uncovered and still safe).

A crash mid-compaction leaves no half event: the summary exists only in memory
until the single atomic append (crash point ``compaction-summarized``, between
the two, for tests).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from mnemoray.compaction.boundaries import CachedEncoder, Encode
from mnemoray.compaction.compactor import CompactionConfig, Compactor, Plan
from mnemoray.compaction.policy import effective_config
from mnemoray.faults import crash_point
from mnemoray.sessions.events import Event
from mnemoray.sessions.store import SessionStore
from mnemoray.sessions.types import (
    SessionEndedError,
    SessionNotFoundError,
    SessionNotice,
    StaleSessionError,
)
from mnemoray.summarizers.base import Summarizer

log = logging.getLogger(__name__)

SessionKey = tuple[str, str, str]
MAX_ROUNDS = 32  # compactions (and stale retries) per pass over one session


@dataclass(frozen=True)
class CompactionDone:
    """One compaction that landed (for metrics and callers)."""

    app_name: str
    user_id: str
    session_id: str
    event: Event
    trigger: str
    seconds: float  # from the start of summarizing to the event being durable

    @property
    def raw_tokens(self) -> int:
        return int(self.event.data.get("raw_tokens", 0))

    @property
    def summary_tokens(self) -> int:
        return int(self.event.data.get("summary_tokens", 0))

    @property
    def compression_ratio(self) -> float:
        """Raw tokens covered per summary token."""
        return self.raw_tokens / max(1, self.summary_tokens)


OnCompacted = Callable[[CompactionDone], object]
ErrorHandler = Callable[[BaseException, SessionKey], object]


class AutoCompactor:
    """Compacts sessions of attached stores in background threads (see module doc).

    ``summarizer``: the configured one (memory ingestion's); ``summarizer_for(app)``
    may return another per app (e.g. its own compaction prompt). ``policy``: the
    default; ``policy_for(app)`` the app's. ``encode``: vectors for ``topic_shift``.
    """

    def __init__(
        self,
        summarizer: Summarizer,
        policy: CompactionConfig | None = None,
        *,
        summarizer_for: Callable[[str], Summarizer] | None = None,
        policy_for: Callable[[str], CompactionConfig] | None = None,
        encode: Encode | None = None,
        on_compacted: OnCompacted | None = None,
        on_error: ErrorHandler | None = None,
        workers: int = 1,
    ) -> None:
        if not callable(getattr(summarizer, "summarize", None)):
            raise TypeError(f"summarizer: expected a Summarizer, got {type(summarizer).__name__}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers: must be an int >= 1, got {workers!r}")
        policy = CompactionConfig() if policy is None else policy
        if not isinstance(policy, CompactionConfig):
            raise TypeError(f"policy: expected CompactionConfig, got {type(policy).__name__}")
        self._summarizer_for = summarizer_for or (lambda _app: summarizer)
        self._policy_for = policy_for or (lambda _app: policy)
        self._encode = None if encode is None else CachedEncoder(encode)
        self._on_compacted = on_compacted
        self._on_error = on_error
        self._cond = threading.Condition()
        self._queue: deque[tuple[SessionStore, SessionKey]] = deque()
        self._queued: set[tuple[int, SessionKey]] = set()
        self._running: set[tuple[int, SessionKey]] = set()
        self._dirty: set[tuple[int, SessionKey]] = set()
        self._attached: list[tuple[SessionStore, Callable[[SessionNotice], None]]] = []
        self._threads: list[threading.Thread] = []
        self._workers = workers
        self._stopping = False

    # -- wiring ------------------------------------------------------------------------
    def attach(self, store: SessionStore) -> AutoCompactor:
        """Compact ``store``'s sessions after each append (starts the workers)."""
        if any(s is store for s, _ in self._attached):
            return self

        def listener(notice: SessionNotice) -> None:
            self._on_notice(store, notice)

        store.add_listener(listener, ("appended",))
        self._attached.append((store, listener))
        self._start()
        return self

    def detach(self, store: SessionStore) -> None:
        for s, listener in [(s, f) for s, f in self._attached if s is store]:
            s.remove_listener(listener)
        self._attached = [(s, f) for s, f in self._attached if s is not store]

    def stop(self, timeout: float | None = 10.0) -> None:
        """Detach from every store and stop the workers (a compaction in progress ends)."""
        for store, _ in list(self._attached):
            self.detach(store)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until nothing is queued or running (demos, tests, shutdown). True if so."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # -- the core, also callable inline ---------------------------------------------------
    def compact_now(
        self, store: SessionStore, app_name: str, user_id: str, session_id: str
    ) -> list[Event]:
        """Compact one session until no trigger fires; the events that landed."""
        key = (app_name, user_id, session_id)
        item = (id(store), key)
        with self._cond:  # the same one-at-a-time claim the workers take
            while item in self._running:
                self._cond.wait()
            self._running.add(item)
        try:
            return self._drain(store, key)
        finally:
            self._release(store, item)

    def _drain(self, store: SessionStore, key: SessionKey) -> list[Event]:
        landed: list[Event] = []
        carried: tuple[int, Plan, Event, float] | None = None  # refused for a stale copy
        for _ in range(MAX_ROUNDS):
            try:
                session = store.get_session(*key)
            except SessionNotFoundError:
                break
            config = effective_config(self._policy_for(key[0]), session)
            if session.ended or not config.enabled:
                break
            if carried is not None and not any(
                e.type == "compaction" for e in session.events[carried[0] :]
            ):
                # Only content landed meanwhile: the window is still uncovered, and a later
                # event cannot unsettle an earlier cut, so the same summary lands.
                _, planned, event, started = carried
            else:
                compactor = Compactor(self._summarizer_for(key[0]), config, encode=self._encode)
                plan = compactor.plan_window(session)
                if plan is None:
                    break
                planned, started = plan, time.perf_counter()
                event = compactor.summarize(session, planned)
                if not compactor.shrinks(planned, event):
                    break
            carried = None
            crash_point("compaction-summarized")
            try:
                store.append_event(session, event)
            except StaleSessionError:
                carried = (session.version, planned, event, started)
                continue  # something landed meanwhile: look again on a fresh copy
            except (SessionEndedError, SessionNotFoundError):
                break
            landed.append(event)
            self._report(
                CompactionDone(*key, event, planned.trigger, time.perf_counter() - started)
            )
        return landed

    # -- queue and workers ----------------------------------------------------------------
    def _on_notice(self, store: SessionStore, notice: SessionNotice) -> None:
        session = notice.session
        if notice.change != "appended" or session is None or session.ended:
            return
        if all(e.type == "compaction" for e in session.events[-1:]):
            return  # our own append (or nothing new): no new content to plan for
        app_policy = self._policy_for(notice.app_name)
        # Only an app without triggers needs the session's own policy looked up here.
        if not app_policy.enabled and not effective_config(app_policy, session).enabled:
            return
        item = (id(store), session.key)
        with self._cond:
            if item in self._running:
                self._dirty.add(item)
            elif item not in self._queued:
                self._queued.add(item)
                self._queue.append((store, session.key))
                self._cond.notify()

    def _start(self) -> None:
        with self._cond:
            self._stopping = False
            alive = [t for t in self._threads if t.is_alive()]
            for n in range(len(alive), self._workers):
                thread = threading.Thread(
                    target=self._work, daemon=True, name=f"mnemoray-compactor-{n}"
                )
                thread.start()
                alive.append(thread)
            self._threads = alive

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                store, key = self._queue.popleft()
                item = (id(store), key)
                self._queued.discard(item)
                if item in self._running:  # compact_now has it: run again after
                    self._dirty.add(item)
                    continue
                self._running.add(item)
            try:
                self._drain(store, key)
            except Exception as exc:  # reported; the next append retries the session
                self._fail(exc, key)
            finally:
                self._release(store, item)

    def _release(self, store: SessionStore, item: tuple[int, SessionKey]) -> None:
        with self._cond:
            self._running.discard(item)
            if item in self._dirty and not self._stopping:
                self._dirty.discard(item)
                self._queued.add(item)
                self._queue.append((store, item[1]))
            self._cond.notify_all()

    def _report(self, done: CompactionDone) -> None:
        if self._on_compacted is None:
            return
        try:
            self._on_compacted(done)
        except Exception:  # a metrics hook must never undo a landed compaction
            log.exception("auto compaction: on_compacted failed")

    def _fail(self, exc: Exception, key: SessionKey) -> None:
        log.error(
            "auto compaction failed for session %s/%s/%s (nothing written): %s",
            *key,
            exc,
            exc_info=exc,
        )
        if self._on_error is not None:
            try:
                self._on_error(exc, key)
            except Exception:
                log.exception("auto compaction: on_error handler failed")
