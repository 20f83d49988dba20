"""Outside sources a compile may read: long-term memory and artifacts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mnemoray.artifacts import ArtifactStore


@dataclass(frozen=True)
class MemorySnippet:
    """One recalled memory, as the compiler shows it to the model."""

    memory_id: str
    text: str
    score: float
    session_id: str = ""
    kind: str = ""
    time: float | None = None


# (app_name, user_id, query, top_k) -> best snippets first.
MemorySearch = Callable[[str, str, str, int], Sequence[MemorySnippet]]


@dataclass
class Services:
    memory_search: MemorySearch | None = None
    artifacts: ArtifactStore | None = None
