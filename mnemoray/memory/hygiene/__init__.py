"""Memory hygiene: recall usage, per-user limits and eviction, consolidation of old
memories into summaries, and forgets that reach those summaries."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "ConsolidationPolicy": "mnemoray.memory.hygiene.consolidate",
    "EvictionPolicy": "mnemoray.memory.hygiene.evict",
    "MemoryHygiene": "mnemoray.memory.hygiene.attach",
    "RecallUsage": "mnemoray.memory.hygiene.usage",
    "UserLimits": "mnemoray.memory.hygiene.limits",
    "attach_hygiene": "mnemoray.memory.hygiene.attach",
    "close_service": "mnemoray.memory.hygiene.attach",
    "consolidate": "mnemoray.memory.hygiene.consolidate",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
