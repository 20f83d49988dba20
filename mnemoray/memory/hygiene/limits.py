"""Per-user limits enforced after writes, off the write path.

    limits = UserLimits(service, EvictionPolicy(max_memories=500), usage=usage).attach()

The ``on_memory_created`` hook marks the (app, user) it wrote to; one daemon thread
evicts each marked user down to the app's limit (:func:`~mnemoray.memory.hygiene.evict.evict_user`).
Marks coalesce: a burst of writes for one user costs one eviction pass. The same
code runs in-process and in a Serve replica (each write there goes through the
replica's ``MemoryService`` and its hooks). :meth:`enforce` and :meth:`enforce_all`
run a pass directly (a scheduled job, a test).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mnemoray.memory.hygiene.evict import EvictionPolicy, evict_user
from mnemoray.memory.service.hooks import MemoryEvent

if TYPE_CHECKING:
    from mnemoray.memory.hygiene.usage import RecallUsage
    from mnemoray.memory.service.service import MemoryService

log = logging.getLogger(__name__)


class UserLimits:
    def __init__(
        self,
        service: MemoryService,
        policy: EvictionPolicy | None = None,
        *,
        app_policies: Mapping[str, EvictionPolicy] | None = None,
        usage: RecallUsage | None = None,
    ) -> None:
        self.service = service
        self.policy = policy or EvictionPolicy()
        self.app_policies = dict(app_policies or {})
        self.usage = usage
        self.evicted = 0  # memories evicted so far (stats)
        self._dirty: dict[tuple[str, str], None] = {}  # insertion-ordered set
        self._busy = False
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def policy_for(self, app_name: str) -> EvictionPolicy:
        return self.app_policies.get(app_name, self.policy)

    @property
    def any_limit(self) -> bool:
        return any(p.limited for p in (self.policy, *self.app_policies.values()))

    # -- marks ---------------------------------------------------------------------------
    def on_created(self, event: MemoryEvent) -> None:
        """The ``on_memory_created`` hook: check this user soon."""
        if self.policy_for(event.app_name).limited:
            with self._cond:
                self._dirty[(event.app_name, event.user_id)] = None
                self._cond.notify_all()

    def attach(self, *, start: bool = True) -> UserLimits:
        self.service.on_memory_created(self.on_created)
        self.service.hooks.add_stats(lambda: {"memories_evicted": self.evicted})
        return self.start() if start else self

    # -- passes --------------------------------------------------------------------------
    def enforce(self, app_name: str, user_id: str, now: float | None = None) -> list[str]:
        """Evict this user down to the app's limit now; the ids evicted."""
        evicted = evict_user(
            self.service, app_name, user_id, self.policy_for(app_name), self.usage, now
        )
        if evicted:
            self.evicted += len(evicted)
            log.info(
                "memory limits: evicted %d memories of %s/%s (%s)",
                len(evicted),
                app_name,
                user_id,
                self.policy_for(app_name).policy,
            )
        return evicted

    def enforce_all(self, now: float | None = None) -> dict[tuple[str, str], list[str]]:
        """A pass over every user of the store with a limit; who lost what."""
        self.service.reloader.refresh()
        out: dict[tuple[str, str], list[str]] = {}
        for app_name, user_id in self.service.snapshot().tenants():
            if self.policy_for(app_name).limited:
                evicted = self.enforce(app_name, user_id, now)
                if evicted:
                    out[(app_name, user_id)] = evicted
        return out

    def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait until every marked user was checked (hooks flushed first); False on
        timeout."""
        deadline = time.monotonic() + timeout_s
        if not self.service.hooks.flush(timeout_s):
            return False
        with self._cond:
            while self._dirty or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # -- the thread ----------------------------------------------------------------------
    def start(self) -> UserLimits:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(
                target=self._loop, name="mnemoray-memory-limits", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                key = next(iter(self._dirty))
                del self._dirty[key]
                self._busy = True
            try:
                self.enforce(*key)
            except Exception:  # the next write for this user tries again
                log.exception("memory limits: eviction for %s/%s failed", *key)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
