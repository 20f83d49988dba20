"""Per-user memory limits and the eviction policy that keeps a user under one.

When a user holds more than ``max_memories`` live memories, the excess is forgotten
with reason ``evicted:<policy>`` (actor ``eviction``), chosen by the policy:

- ``least_recently_recalled``: the memories whose last use is oldest, where storing a
  memory counts as its first use (a new memory is not evicted before an old one that
  was recalled long ago; recall usage comes from
  :class:`~mnemoray.memory.hygiene.usage.RecallUsage`);
- ``oldest``: the oldest stored first;
- ``lowest_value``: the lowest ``kind weight * (1 + recalls) * 0.5 ** (idle / half_life_s)``,
  idle = time since last use: summaries outweigh raw chunks, and what is recalled
  often and lately is kept.

Ties go to the oldest. Limits are per app (``limits_for``); ``max_memories`` None or
0: no limit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from mnemoray.errors import InvalidInput
from mnemoray.files import file_lock
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.hygiene_db import hygiene_path

if TYPE_CHECKING:
    from mnemoray.memory.hygiene.usage import RecallUsage, Usage
    from mnemoray.memory.service.service import MemoryService

EvictionName = Literal["least_recently_recalled", "oldest", "lowest_value"]
EVICTION_POLICIES: tuple[str, ...] = get_args(EvictionName)
ACTOR = "eviction"
EVICT_LOCK = "evict.lock"
DEFAULT_KIND_WEIGHTS: Mapping[str, float] = {
    "consolidated_summary": 3.0,
    "session_summary": 2.0,
    "fact": 2.0,
    "compaction_summary": 1.5,
    "chunk": 1.0,
}


def eviction_reason(policy: str) -> str:
    return f"evicted:{policy}"


@dataclass(frozen=True)
class EvictionPolicy:
    max_memories: int | None = None
    policy: EvictionName = "least_recently_recalled"
    half_life_s: float = 30 * 86400.0
    kind_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_KIND_WEIGHTS))

    def __post_init__(self) -> None:
        n = self.max_memories
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise InvalidInput(f"must be an integer >= 0 or None, got {n!r}", field="max_memories")
        if self.policy not in EVICTION_POLICIES:
            raise InvalidInput(
                f"{self.policy!r} is not one of {', '.join(EVICTION_POLICIES)}", field="policy"
            )
        if not float(self.half_life_s) > 0:
            raise InvalidInput("must be > 0 seconds", field="half_life_s")

    @property
    def limited(self) -> bool:
        return bool(self.max_memories)


def _last_use(m: Memory, usage: Mapping[str, Usage]) -> float:
    used = usage.get(m.memory_id)
    return m.created_at if used is None else max(m.created_at, used[1])


def value(m: Memory, usage: Mapping[str, Usage], policy: EvictionPolicy, now: float) -> float:
    """The ``lowest_value`` score of ``m`` (higher: kept longer)."""
    recalls = usage.get(m.memory_id, (0, 0.0))[0]
    idle = max(0.0, now - _last_use(m, usage))
    weight = float(policy.kind_weights.get(m.kind, 1.0))
    return weight * (1 + recalls) * 0.5 ** (idle / float(policy.half_life_s))


def eviction_order(
    memories: Sequence[Memory],
    usage: Mapping[str, Usage],
    policy: EvictionPolicy,
    now: float | None = None,
) -> list[Memory]:
    """``memories``, the first to evict first."""
    now = time.time() if now is None else now

    def age(m: Memory) -> tuple[float, str]:
        return (m.created_at, m.memory_id)

    if policy.policy == "oldest":
        return sorted(memories, key=age)
    if policy.policy == "least_recently_recalled":
        return sorted(memories, key=lambda m: (_last_use(m, usage), *age(m)))
    return sorted(memories, key=lambda m: (value(m, usage, policy, now), *age(m)))


def evict_user(
    service: MemoryService,
    app_name: str,
    user_id: str,
    policy: EvictionPolicy,
    usage: RecallUsage | None = None,
    now: float | None = None,
) -> list[str]:
    """Forget the user's memories over ``policy.max_memories``; the ids evicted."""
    if not policy.limited:
        return []
    assert policy.max_memories is not None
    # One eviction pass at a time per store: two replicas counting the same excess before
    # either forgot would evict it twice (with different usage: different memories).
    with file_lock(hygiene_path(service.store.root, EVICT_LOCK)):
        service.reloader.refresh()
        snap = service.snapshot()
        if snap.count(app_name, user_id) <= policy.max_memories:  # cheap: no rows read
            return []
        live = snap.rows_for_user(app_name, user_id)
        excess = len(live) - policy.max_memories
        if excess <= 0:
            return []
        used = usage.of_user(app_name, user_id) if usage is not None else {}
        victims = [m.memory_id for m in eviction_order(live, used, policy, now)[:excess]]
        service.forget_memories(
            app_name, user_id, victims, reason=eviction_reason(policy.policy), actor=ACTOR
        )
    return victims


__all__ = [
    "ACTOR",
    "DEFAULT_KIND_WEIGHTS",
    "EVICTION_POLICIES",
    "EvictionName",
    "EvictionPolicy",
    "evict_user",
    "eviction_order",
    "eviction_reason",
    "value",
]
