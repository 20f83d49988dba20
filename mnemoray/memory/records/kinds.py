"""The kinds of memory record: dependency-free, so the HTTP schemas and the client
(``pip install 'mnemoray[client]'``) can name them without importing numpy."""

from __future__ import annotations

from typing import Literal, get_args

# consolidated_summary: old memories merged (mnemoray.memory.hygiene.consolidate); its
# source_event_ids are the ids of the memories it merges.
MemoryKind = Literal[
    "session_summary", "fact", "chunk", "compaction_summary", "consolidated_summary"
]
MEMORY_KINDS: tuple[str, ...] = get_args(MemoryKind)
