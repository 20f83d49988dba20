"""A running ``mnemoray serve`` as the memory behind :class:`MnemorayMemoryService`.

The same calls as the in-process :class:`~mnemoray.memory.service.service.MemoryService`
(``add_session``, ``search``, ``add_memories``, ``forget_memory``), over
:class:`mnemoray.client.MnemorayClient`: the server does the distilling, embedding
and recall, so one rule holds wherever the agent runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mnemoray.adk.convert import memory_from_recall
from mnemoray.client import MnemorayClient
from mnemoray.errors import NotFound
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.session import Session

# MemoryIn fields of the HTTP API a raw memory carries (the rest is server-side).
_MEMORY_IN = (
    "text",
    "session_id",
    "kind",
    "memory_id",
    "key_text",
    "topics",
    "key_facts",
    "entities",
    "source_event_ids",
    "event_time_start",
    "event_time_end",
    "expires_at",
)


def _plain(answer: Any) -> Any:
    """The client's typed answer (a pydantic model) as JSON-like data."""
    return answer.model_dump(mode="json") if hasattr(answer, "model_dump") else answer


@dataclass(frozen=True)
class RemoteResult:
    """One recalled memory, shaped like :class:`~mnemoray.memory.recall.result.RecallResult`."""

    memory: Memory
    score: float


class RemoteMemorySource:
    """The memory calls of the ADK adapter against ``mnemoray serve`` (blocking)."""

    def __init__(self, client: MnemorayClient) -> None:
        self.client = client

    def add_session(self, session: Session) -> dict[str, Any]:
        return _plain(self.client.add_session(session.to_dict(), wait=True))

    def search(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int = 5,
        filters: Mapping[str, Any] | None = None,
    ) -> list[RemoteResult]:
        answer = _plain(
            self.client.recall(
                app_name, user_id, query, top_k=top_k, filters=dict(filters) if filters else None
            )
        )
        return [
            RemoteResult(memory_from_recall(m, app_name, user_id), float(m["score"]))
            for m in answer["memories"]
        ]

    def add_memories(self, memories: Sequence[Memory]) -> dict[str, Any] | None:
        """Raw memories, grouped per (app, user) as the API takes them."""
        by_user: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for m in memories:
            row = m.to_dict()
            item = {k: row[k] for k in _MEMORY_IN if row.get(k) not in (None, [], "")}
            by_user.setdefault((m.app_name, m.user_id), []).append(item)
        answer = None
        for (app_name, user_id), items in by_user.items():
            answer = _plain(self.client.add_memories(app_name, user_id, items))
        return answer

    def forget_memory(
        self, app_name: str, user_id: str, memory_id: str, *, reason: str = "", actor: str = ""
    ) -> int:
        """How many rows went; 0 when the user has no such live memory (as in-process).
        The server records the actor itself (the API key)."""
        try:
            return int(self.client.forget_memory(app_name, user_id, memory_id, reason=reason))
        except NotFound:
            return 0


__all__ = ["RemoteMemorySource", "RemoteResult"]
