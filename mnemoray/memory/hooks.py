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
shutdown). Delivery is in emission order, one hook after the other.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from mnemoray.memory.record import Memory

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
        return {"hook": self.hook, "app_name": self.app_name, "user_id": self.user_id,
                "memory_ids": list(self.memory_ids), "at": self.at, "query": self.query,
                "reason": self.reason, "actor": self.actor, "scope": self.scope,
                "memories": [m.to_dict() for m in self.memories]}


Hook = Callable[[MemoryEvent], Any]


class MemoryHooks:
    """The hook registry of one ``MemoryService`` and its delivery thread."""

    def __init__(self, max_queue: int = DEFAULT_QUEUE) -> None:
        self._hooks: dict[str, list[Hook]] = {name: [] for name in HOOK_NAMES}
        self._queue: queue.Queue[MemoryEvent | None] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self.errors = 0
        self.dropped = 0
        self._stat_sources: list[Callable[[], dict[str, int]]] = []  # e.g. a webhook's

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

    def unregister(self, hook: str, fn: Hook) -> None:
        with self._lock:
            self._hooks[hook] = [f for f in self._hooks.get(hook, []) if f is not fn]

    def on_memory_created(self, fn: Hook) -> Hook:
        return self.register("on_memory_created", fn)

    def on_memory_recalled(self, fn: Hook) -> Hook:
        return self.register("on_memory_recalled", fn)

    def on_memory_forgotten(self, fn: Hook) -> Hook:
        return self.register("on_memory_forgotten", fn)

    def wants(self, hook: str) -> bool:
        """Whether anything listens (callers skip building the event otherwise)."""
        return bool(self._hooks.get(hook))

    # -- emission ----------------------------------------------------------------------
    def emit(self, event: MemoryEvent) -> None:
        """Queue ``event`` for its hooks; never raises, never blocks."""
        if not self._hooks.get(event.hook):
            return
        self._ensure_thread()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            with self._lock:
                self.dropped += 1
                dropped = self.dropped
            if dropped <= LOGGED_ERRORS or dropped % 1000 == 0:  # no log flood
                log.warning("memory hooks: queue full, %s event for %s/%s dropped (%d so "
                            "far)", event.hook, event.app_name, event.user_id, dropped)

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mnemoray-memory-hooks",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                if event is None:
                    return
                for fn in self._hooks.get(event.hook, []):
                    self._call(fn, event)
            finally:
                self._queue.task_done()

    def _call(self, fn: Hook, event: MemoryEvent) -> None:
        try:
            fn(event)
            self.delivered += 1
        except Exception as exc:  # a hook's failure is its own: count it, go on
            self.errors += 1
            if self.errors <= LOGGED_ERRORS or self.errors % 1000 == 0:  # no log flood
                log.warning("memory hook %s for %s failed (%d failures so far): %s: %s",
                            getattr(fn, "__qualname__", repr(fn)), event.hook, self.errors,
                            type(exc).__name__, exc, exc_info=exc)

    # -- control -----------------------------------------------------------------------
    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every event queued so far was delivered; False on timeout."""
        if self._thread is None:
            return True
        done = threading.Event()

        def wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout_s)

    def stop(self) -> None:
        """Deliver what is queued, then end the thread (a later emit starts a new one)."""
        thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=10.0)
        except queue.Full:  # a hook is stuck: leave the daemon thread to the interpreter
            log.warning("memory hooks: queue still full at stop; undelivered events dropped")
        thread.join(timeout=10.0)
        with self._lock:
            self._thread = None

    def add_stats(self, source: Callable[[], dict[str, int]]) -> None:
        """Report ``source()``'s counters in :meth:`stats` too."""
        self._stat_sources.append(source)

    def stats(self) -> dict[str, int]:
        out = {"hooks_delivered": self.delivered, "hook_errors": self.errors,
               "hook_events_dropped": self.dropped, "hooks_queued": self._queue.qsize()}
        for source in self._stat_sources:
            out.update(source())
        return out


def emit_memories(hooks: MemoryHooks, hook: HookName, memories: Sequence[Memory],
                  **details: str) -> None:
    """One event per (app, user) among ``memories`` (embeddings left out)."""
    if not memories or not hooks.wants(hook):
        return
    owners: dict[tuple[str, str], list[Memory]] = {}
    for m in memories:
        owners.setdefault((m.app_name, m.user_id), []).append(replace(m, embedding=None))
    for (app_name, user_id), group in owners.items():
        hooks.emit(MemoryEvent(hook, app_name, user_id, tuple(m.memory_id for m in group),
                               memories=tuple(group), **details))


__all__ = ["HOOK_NAMES", "Hook", "HookName", "MemoryEvent", "MemoryHooks", "emit_memories"]
