"""Outside sources a compile may read: long-term memory and artifacts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mnemoray.artifacts.store import ArtifactStore


@dataclass(frozen=True)
class MemorySnippet:
    """One recalled memory, as the compiler shows it to the model."""

    memory_id: str
    text: str
    score: float
    session_id: str = ""
    kind: str = ""
    time: float | None = None

    @classmethod
    def from_recalled(cls, d: Mapping[str, Any]) -> MemorySnippet:
        """From the one JSON form of a recalled memory (``RecallResult.to_dict``)."""
        prov = d.get("provenance") or {}
        when = prov.get("event_time_end")
        return cls(
            memory_id=d["memory_id"],
            text=d["text"],
            score=float(d["score"]),
            session_id=prov.get("session_id", ""),
            kind=d.get("kind", ""),
            time=when if when is not None else prov.get("created_at"),
        )


class MemorySearch(Protocol):
    """(app_name, user_id, query, top_k) -> best snippets first; ``budget_tokens``
    (passed only when set): the best whose text fits in that many tokens."""

    def __call__(
        self, app_name: str, user_id: str, query: str, top_k: int, /, **budget: int
    ) -> Sequence[MemorySnippet]: ...


# (app_name, user_id) -> the user's profile as JSON (mnemoray.profiles; None: none yet).
ProfileSource = Callable[[str, str], Mapping[str, Any] | None]


@dataclass
class Services:
    memory_search: MemorySearch | None = None
    artifacts: ArtifactStore | None = None
    user_profile: ProfileSource | None = None
