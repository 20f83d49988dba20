"""Session compaction: older invocations summarized into a ``compaction`` event (the
raw events stay), at semantic boundaries, by itself after appends, per a session"s policy."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "AutoCompactor": "mnemoray.compaction.auto",
    "CompactionConfig": "mnemoray.compaction.compactor",
    "Compactor": "mnemoray.compaction.compactor",
    "Timeline": "mnemoray.compaction.timeline",
    "find_boundaries": "mnemoray.compaction.boundaries",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
