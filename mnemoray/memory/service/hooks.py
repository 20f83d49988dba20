"""Memory lifecycle hooks: in-process callables told when memories are created,
recalled or forgotten, delivered off the caller's path.

    service.hooks.on_memory_recalled(lambda ev: usage.touch(ev.app_name, ev.user_id,
                                                            ev.memory_ids))
    service.hooks.on_memory_forgotten(audit.write)

Each event is handed to one daemon thread through a bounded queue, so a slow or
failing hook never slows or breaks recall or a write: the caller pays one queue
put (nothing at all while no hook is registered). A hook's exception is logged
and counted, never raised; when the queue is full the event is dropped and
counted. ``flush()`` waits until everything queued so far was delivered (tests,
shutdown); ``stop()`` is bounded too. Delivery is in emission order, one hook after the
other. Two synchronous kinds exist for work that must not be dropped:
``register_sync`` (run on the emitting thread after the change, e.g. the forget
cascade) and ``before_erase`` (run before a user or session forget, e.g. cancelling
their queued ingestion).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from mnemoray.memory.records.record import Memory

log = logging.getLogger(__name__)

HookName = Literal["on_memory_created", "on_memory_recalled", "on_memory_forgotten"]
HOOK_NAMES: tuple[str, ...] = get_args(HookName)
DEFAULT_QUEUE = 10_000
LOGGED_ERRORS = 10  # failures and drops logged one by one; then every 1000th


@dataclass(frozen=True)
class MemoryEvent:
    """What happened to which memories of one (app, user).

    ``memories``: the records (created: as written; forgotten: as they were, when
    known). ``query``: the recall query. ``reason`` / ``actor``: why and by whom a
    memory was forgotten or changed. ``scope``: forgotten by "memory", "session",
    "user" or "query".
    """

    hook: HookName
    app_name: str
    user_id: str
    memory_ids: tuple[str, ...]
    at: float = field(default_factory=time.time)
    memories: tuple[Memory, ...] = field(default=(), repr=False)
    query: str = ""
    reason: str = ""
    actor: str = ""
    scope: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the webhook body); memories without their embeddings."""
        return {
            "hook": self.hook,
            "app_name": self.app_name,
            "user_id": self.user_id,
            "memory_ids": list(self.memory_ids),
            "at": self.at,
            "query": self.query,
            "reason": self.reason,
            "actor": self.actor,
            "scope": self.scope,
            "memories": [m.to_dict() for m in self.memories],
        }


Hook = Callable[[MemoryEvent], Any]
# Called synchronously before a user (session_id None) or a session is forgotten; an
# exception stops the forget (e.g. the ingestion queue could not cancel their jobs).
EraseGuard = Callable[[str, str, "str | None"], Any]


class MemoryHooks:
    """The hook registry of one ``MemoryService`` and its delivery thread."""

    def __init__(self, max_queue: int = DEFAULT_QUEUE) -> None:
        self._hooks: dict[str, list[Hook]] = {name: [] for name in HOOK_NAMES}
        self._queue: queue.Queue[MemoryEvent | None] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Events queued and not yet delivered; flush() waits on it (no helper thread).
        self._undelivered = 0
        self._idle = threading.Condition(self._lock)
        # The delivery thread's: stop() asked it to end at the end of the queue; stop()
        # gave up waiting, so it ends after the event in hand.
        self._stopping = threading.Event()
        self._quit = threading.Event()
        self.delivered = 0
        self.errors = 0
        self.dropped = 0
        self._stat_sources: list[Callable[[], dict[str, int]]] = []  # e.g. a webhook's
        self._erase_guards: list[EraseGuard] = []
        self._sync: dict[str, list[Hook]] = {name: [] for name in HOOK_NAMES}

    # -- registration --------------------------------------------------------------
    def register(self, hook: str, fn: Hook) -> Hook:
        """Call ``fn(event)`` for every ``hook`` event; returns ``fn`` (usable as a
        decorator through the ``on_*`` methods)."""
        if hook not in self._hooks:
            raise ValueError(f"hook: {hook!r} is not one of {', '.join(HOOK_NAMES)}")
        if not callable(fn):
            raise TypeError(f"{hook}: expected a callable, got {type(fn).__name__}")
        with self._lock:
            self._hooks[hook] = [*self._hooks[hook], fn]  # copy: readers never lock
        return fn

    def on_memory_created(self, fn: Hook) -> Hook:
        return self.register("on_memory_created", fn)

    def on_memory_recalled(self, fn: Hook) -> Hook:
        return self.register("on_memory_recalled", fn)

    def on_memory_forgotten(self, fn: Hook) -> Hook:
        return self.register("on_memory_forgotten", fn)

    def register_sync(self, hook: str, fn: Hook) -> Hook:
        """Call ``fn(event)`` on the emitting thread, after the change committed and the
        service's write lock was released (:meth:`deliver_sync`): for work that must not
        be lost to a full queue, e.g. a forget reaching consolidated summaries. Its
        exception is logged and counted, never raised."""
        if hook not in self._sync:
            raise ValueError(f"hook: {hook!r} is not one of {', '.join(HOOK_NAMES)}")
        if not callable(fn):
            raise TypeError(f"{hook}: expected a callable, got {type(fn).__name__}")
        with self._lock:
            self._sync[hook] = [*self._sync[hook], fn]
        return fn

    def deliver_sync(self, event: MemoryEvent) -> None:
        for fn in self._sync.get(event.hook, []):
            self._call(fn, event)

    def before_erase(self, fn: EraseGuard) -> EraseGuard:
        """Call ``fn(app_name, user_id, session_id)`` on the caller's thread before a
        user (``session_id`` None) or a session is forgotten, even when nothing of theirs
        is stored yet: what is still on its way in (a queued ingestion) must not write
        them back. Unlike the hooks, its exception reaches the caller."""
        if not callable(fn):
            raise TypeError(f"before_erase: expected a callable, got {type(fn).__name__}")
        with self._lock:
            self._erase_guards = [*self._erase_guards, fn]
        return fn

    def guard_erase(self, app_name: str, user_id: str, session_id: str | None) -> None:
        for fn in self._erase_guards:
            fn(app_name, user_id, session_id)

    def wants(self, hook: str) -> bool:
        """Whether anything listens (callers skip building the event otherwise)."""
        return bool(self._hooks.get(hook)) or bool(self._sync.get(hook))

    # -- emission ----------------------------------------------------------------------
    def emit(self, event: MemoryEvent) -> None:
        """Queue ``event`` for its hooks; never raises, never blocks."""
        if not self._hooks.get(event.hook):
            return
        self._ensure_thread()
        with self._lock:
            self._undelivered += 1
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._done_one()
            with self._lock:
                self.dropped += 1
                dropped = self.dropped
            if dropped <= LOGGED_ERRORS or dropped % 1000 == 0:  # no log flood
                log.warning(
                    "memory hooks: queue full, %s event for %s/%s dropped (%d so far)",
                    event.hook,
                    event.app_name,
                    event.user_id,
                    dropped,
                )

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._stopping, self._quit = threading.Event(), threading.Event()
                self._thread = threading.Thread(
                    target=self._run,
                    name="mnemoray-memory-hooks",
                    args=(self._stopping, self._quit),
                    daemon=True,
                )
                self._thread.start()

    def _run(self, stopping: threading.Event, quit_: threading.Event) -> None:
        while not quit_.is_set():
            event = self._queue.get()
            if event is None:  # a stop's marker (an older stop's, left over: ignored)
                if stopping.is_set():
                    return
                continue
            try:
                for fn in self._hooks.get(event.hook, []):
                    self._call(fn, event)
            finally:
                self._done_one()

    def _done_one(self) -> None:
        with self._idle:
            self._undelivered -= 1
            if self._undelivered <= 0:
                self._idle.notify_all()

    def _call(self, fn: Hook, event: MemoryEvent) -> None:
        try:
            fn(event)
            self.delivered += 1
        except Exception as exc:  # a hook's failure is its own: count it, go on
            self.errors += 1
            if self.errors <= LOGGED_ERRORS or self.errors % 1000 == 0:  # no log flood
                log.warning(
                    "memory hook %s for %s failed (%d failures so far): %s: %s",
                    getattr(fn, "__qualname__", repr(fn)),
                    event.hook,
                    self.errors,
                    type(exc).__name__,
                    exc,
                    exc_info=exc,
                )

    # -- control -----------------------------------------------------------------------
    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every event queued so far was delivered; False on timeout (nothing
        is left waiting behind)."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._undelivered > 0:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._idle.wait(left)
        return True

    def stop(self, timeout_s: float = 5.0) -> None:
        """Deliver what is queued within ``timeout_s`` in all, then end the thread (a
        later emit starts a new one). A hook still stuck then is left to finish its
        event; the thread ends right after it, with the rest undelivered (logged)."""
        thread, stopping, quit_ = self._thread, self._stopping, self._quit
        if thread is None:
            return
        deadline = time.monotonic() + timeout_s
        stopping.set()
        with contextlib.suppress(queue.Full):  # a stuck hook: handled below
            self._queue.put(None, timeout=max(0.0, deadline - time.monotonic()))
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            quit_.set()  # after the event in hand; nobody waits for it any longer
            log.warning(
                "memory hooks: still delivering after %.1fs at stop; %d event(s) left undelivered",
                timeout_s,
                self._queue.qsize(),
            )
        with self._lock:
            if self._thread is thread:
                self._thread = None

    def add_stats(self, source: Callable[[], dict[str, int]]) -> None:
        """Report ``source()``'s counters in :meth:`stats` too."""
        self._stat_sources.append(source)

    def stats(self) -> dict[str, int]:
        out = {
            "hooks_delivered": self.delivered,
            "hook_errors": self.errors,
            "hook_events_dropped": self.dropped,
            "hooks_queued": self._queue.qsize(),
        }
        for source in self._stat_sources:
            out.update(source())
        return out


def memory_events(hook: HookName, memories: Sequence[Memory], **details: Any) -> list[MemoryEvent]:
    """One event per (app, user) among ``memories`` (embeddings left out)."""
    owners: dict[tuple[str, str], list[Memory]] = {}
    for m in memories:
        owners.setdefault((m.app_name, m.user_id), []).append(m.with_derived(embedding=None))
    return [
        MemoryEvent(
            hook,
            app_name,
            user_id,
            tuple(m.memory_id for m in group),
            memories=tuple(group),
            **details,
        )
        for (app_name, user_id), group in owners.items()
    ]


def emit_memories(
    hooks: MemoryHooks, hook: HookName, memories: Sequence[Memory], **details: str
) -> None:
    """Queue one event per (app, user) among ``memories`` for the hooks."""
    if not memories or not hooks.wants(hook):
        return
    for event in memory_events(hook, memories, **details):
        hooks.emit(event)


__all__ = [
    "HOOK_NAMES",
    "EraseGuard",
    "Hook",
    "HookName",
    "MemoryEvent",
    "MemoryHooks",
    "emit_memories",
    "memory_events",
]
