"""Google ADK adapter: mnemoray long-term memory behind ADK's ``BaseMemoryService``.

    from google.adk.runners import Runner
    from mnemoray.adk_memory import MnemorayMemoryService

    runner = Runner(agent=agent, app_name="bird-chat", session_service=sessions,
                    memory_service=MnemorayMemoryService(memory))

ADK's ``load_memory`` and ``preload_memory`` tools then recall distilled
mnemoray memories (session summaries, facts about the user, raw chunks)
instead of keyword-matched raw events.

The wrapped ``service`` is duck-typed: anything with
``add_session(session)`` taking a mnemoray :class:`~mnemoray.session.Session`
and ``search(app_name, user_id, query, top_k=..., filters=None)`` returning
results that carry ``.memory`` (a :class:`~mnemoray.memory.record.Memory`)
and ``.score``, e.g. :class:`mnemoray.memory.service.MemoryService`. Either
method may be a coroutine function; plain ones run in a worker thread
(``offload=True``) so embedding does not block the agent's event loop.

Importing this module needs ``google-adk`` (``pip install mnemoray[dev]`` or
``pip install google-adk``); nothing else in mnemoray imports it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from typing_extensions import override

from mnemoray.adk_import import session_from_adk
from mnemoray.errors import InvalidInput
from mnemoray.events import iso
from mnemoray.memory.record import Memory
from mnemoray.session import Session

if TYPE_CHECKING:
    from google.adk.sessions.session import Session as AdkSession

# Who "said" a memory, as ADK's preload tool prints it ("author: text"). A
# chunk's text already names each speaker line by line.
_AUTHORS = {"fact": "user", "session_summary": "summary", "compaction_summary": "summary",
            "consolidated_summary": "summary"}


class MemoryBackend(Protocol):
    """What :class:`MnemorayMemoryService` needs from a mnemoray memory service."""

    def add_session(self, session: Session) -> Any: ...

    def search(self, app_name: str, user_id: str, query: str, top_k: int = ...,
               filters: Any = None) -> Any: ...


class MnemorayMemoryService(BaseMemoryService):
    """ADK memory service backed by mnemoray.

    ``top_k``: memories per search; ``filters``: passed to every search
    (e.g. kinds or a time range, as the wrapped service understands them);
    ``offload``: run synchronous service calls in a worker thread.
    """

    def __init__(self, service: MemoryBackend, *, top_k: int = 5, filters: Any = None,
                 offload: bool = True) -> None:
        for name in ("add_session", "search"):
            if not callable(getattr(service, name, None)):
                raise TypeError(f"service: {type(service).__name__} has no {name}() method")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise InvalidInput(f"must be a positive int, got {top_k!r}", field="top_k")
        self.service = service
        self.top_k = top_k
        self.filters = filters
        self.offload = offload

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        result = await asyncio.to_thread(fn, *args, **kwargs) if self.offload \
            else fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    @override
    async def add_session_to_memory(self, session: AdkSession) -> None:
        """Map the ADK session onto mnemoray's model and ingest it (idempotent:
        ADK may add one session several times as it grows)."""
        mapped = session_from_adk(session.model_dump(mode="json", by_alias=True))
        await self._call(self.service.add_session, mapped)

    @override
    async def search_memory(self, *, app_name: str, user_id: str,
                            query: str) -> SearchMemoryResponse:
        results = await self._call(self.service.search, app_name, user_id, query,
                                   top_k=self.top_k, filters=self.filters)
        return SearchMemoryResponse(memories=[memory_entry(r.memory, r.score)
                                              for r in results or ()])


def memory_entry(memory: Memory, score: float | None = None) -> MemoryEntry:
    """One mnemoray memory as an ADK ``MemoryEntry``.

    ``timestamp`` is when the remembered conversation happened (ISO-8601,
    UTC); provenance and score go to ``custom_metadata``.
    """
    when = memory.event_time_start if memory.event_time_start is not None \
        else memory.created_at
    metadata: dict[str, Any] = {
        "kind": memory.kind,
        "session_id": memory.session_id,
        "source_event_ids": list(memory.source_event_ids),
    }
    if score is not None:
        metadata["score"] = float(score)
    for name in ("topics", "key_facts", "entities"):
        if getattr(memory, name):
            metadata[name] = list(getattr(memory, name))
    if memory.event_time_end is not None:
        metadata["event_time_end"] = iso(memory.event_time_end)
    return MemoryEntry(
        id=memory.memory_id,
        content=types.Content(role="user", parts=[types.Part(text=memory.text)]),
        author=_AUTHORS.get(memory.kind),
        timestamp=iso(when),
        custom_metadata=metadata,
    )


__all__ = ["MemoryBackend", "MnemorayMemoryService", "memory_entry"]
