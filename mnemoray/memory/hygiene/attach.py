"""Memory hygiene attached to a running ``MemoryService``: recall usage, limits, and
forgets that reach consolidated summaries (``consolidation_cascade``).

    hygiene = attach_hygiene(service, hygiene_settings({"limits": {"max_memories": 500}}))
    ...
    close_service(service, hygiene)   # or hygiene.stop(); service.close()

In-process and in a Serve replica alike (``mnemoray.serve.ingress`` calls it with the
``hygiene`` settings group). Consolidation is not attached: it is a scheduled job
(``mnemoray.jobs.consolidate``, `mnemoray memory consolidate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mnemoray.memory.hygiene.cascade import ForgetCascade
from mnemoray.memory.hygiene.evict import EvictionPolicy
from mnemoray.memory.hygiene.limits import UserLimits
from mnemoray.memory.hygiene.usage import RecallUsage
from mnemoray.memory.ingest.guard import guard_store_jobs
from mnemoray.memory.ingest.queue import JobQueue

if TYPE_CHECKING:
    from mnemoray.memory.service.service import MemoryService


class HygienePolicies(Protocol):
    """What attaching reads of the ``hygiene`` settings group
    (:class:`mnemoray.settings.hygiene.HygieneSettings`)."""

    @property
    def usage_needed(self) -> bool: ...
    @property
    def usage_flush_s(self) -> float: ...
    @property
    def app_limits(self) -> dict[str, EvictionPolicy]: ...
    def limits_for(self, app_name: str | None = None) -> EvictionPolicy: ...


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

    def stop(self, timeout_s: float = 5.0) -> None:
        """Deliver the hooks queued so far (recall counts among them: bounded by
        ``timeout_s``), stop the limits thread, write the counts, close the ledger."""
        self.service.hooks.flush(timeout_s)
        if self.limits is not None:
            self.limits.stop()
        if self.usage is not None:
            self.usage.stop()
        if self.cascade is not None:
            self.cascade.close()


def attach_hygiene(service: MemoryService, settings: HygienePolicies) -> MemoryHygiene:
    """Count recalls (when needed), enforce the limits after writes (per app), and let
    forgets reach the consolidated summaries that merged what went."""
    usage = None
    if settings.usage_needed:
        usage = RecallUsage.of_store(
            service.store.root, flush_interval_s=settings.usage_flush_s
        ).attach(service)
    limits = UserLimits(
        service, settings.limits_for(None), app_policies=settings.app_limits, usage=usage
    )
    return MemoryHygiene(
        service,
        usage,
        limits.attach() if limits.any_limit else None,
        ForgetCascade(service).attach(),
    )


@dataclass
class ForgetEffects:
    """What a forget reaches beyond the store, for a process without the rest of the
    hygiene (the CLI): consolidated summaries, and queued ingestion in ``STORE/jobs.db``."""

    cascade: ForgetCascade
    jobs: JobQueue | None

    def close(self) -> None:
        self.cascade.close()
        if self.jobs is not None:
            self.jobs.close()


def attach_forget_effects(service: MemoryService) -> ForgetEffects:
    """Let this service's forgets and edits reach the summaries that merged what went
    and cancel the owner's queued ingestion jobs, as in a server."""
    return ForgetEffects(ForgetCascade(service).attach(), guard_store_jobs(service))


def close_service(service: MemoryService, hygiene: MemoryHygiene | None, *attached: Any) -> None:
    """Shut a server's service down in order: its hygiene (hooks delivered, recall
    counts written), the service, then what else was ``attached`` to it (a webhook, a
    job queue: each ``stop()``-ed or ``close()``-d; None skipped). Each step runs even
    when one before it failed; the first error is raised at the end."""
    steps = [
        hygiene.stop if hygiene is not None else None,
        service.close,
        *(getattr(a, "stop", None) or getattr(a, "close", None) for a in attached if a is not None),
    ]
    error: BaseException | None = None
    for step in steps:
        if step is None:
            continue
        try:
            step()
        except Exception as exc:  # the rest still stop
            error = error or exc
    if error is not None:
        raise error
