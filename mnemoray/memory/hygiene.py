"""Memory hygiene attached to a running ``MemoryService``: recall usage, limits, and
forgets that reach consolidated summaries (``consolidation_cascade``).

    hygiene = attach_hygiene(service, hygiene_settings({"limits": {"max_memories": 500}}))
    ...
    hygiene.stop()

In-process and in a Serve replica alike (``serve.ingress`` calls it with the
``hygiene`` settings group). Consolidation is not attached: it is a scheduled job
(``jobs.consolidate``, `mnemoray memory consolidate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnemoray.memory.consolidation_cascade import ForgetCascade
from mnemoray.memory.usage import RecallUsage
from mnemoray.memory.user_limits import UserLimits

if TYPE_CHECKING:
    from mnemoray.hygiene_settings import HygieneSettings
    from mnemoray.memory.service import MemoryService


@dataclass
class MemoryHygiene:
    service: MemoryService
    usage: RecallUsage | None
    limits: UserLimits | None
    cascade: ForgetCascade | None = None

    def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait until the hooks queued so far and the pending limit checks ran (tests,
        shutdown); False on timeout."""
        if self.limits is not None:
            return self.limits.drain(timeout_s)  # flushes the hooks first
        return self.service.hooks.flush(timeout_s)

    def stop(self) -> None:
        if self.limits is not None:
            self.limits.stop()
        if self.usage is not None:
            self.usage.stop()
        if self.cascade is not None:
            self.cascade.close()


def attach_hygiene(service: MemoryService, settings: HygieneSettings) -> MemoryHygiene:
    """Count recalls (when needed), enforce the limits after writes (per app), and let
    forgets reach the consolidated summaries that merged what went."""
    usage = None
    if settings.usage_needed:
        usage = RecallUsage.of_store(service.store.root,
                                     flush_interval_s=settings.usage_flush_s).attach(service)
    limits = UserLimits(service, settings.limits_for(None), app_policies=settings.app_limits,
                        usage=usage)
    return MemoryHygiene(service, usage, limits.attach() if limits.any_limit else None,
                         ForgetCascade(service).attach())
