"""What a memory is: the record, its kinds and agent view, how a session becomes records,
and the filters that say which records a recall may return."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "Memory": "mnemoray.memory.records.record",
    "MemoryRecordError": "mnemoray.memory.records.record",
    "MemoryVersion": "mnemoray.memory.records.record",
    "MEMORY_KINDS": "mnemoray.memory.records.kinds",
    "distill_session": "mnemoray.memory.records.distill",
    "RecallFilters": "mnemoray.memory.records.filters",
    "RetrievalError": "mnemoray.memory.records.filters",
    "check_agent_name": "mnemoray.memory.records.agent_names",
    "memory_view": "mnemoray.memory.records.agent_names",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
