"""Session compaction: older invocations summarized into a ``compaction`` event (the
raw events stay), at semantic boundaries, by itself after appends, per a session"s policy."""

from mnemoray.compaction.auto import AutoCompactor
from mnemoray.compaction.boundaries import find_boundaries
from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.compaction.timeline import Timeline

__all__ = ["AutoCompactor", "CompactionConfig", "Compactor", "Timeline", "find_boundaries"]
