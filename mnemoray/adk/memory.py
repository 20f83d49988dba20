"""Google ADK adapter: mnemoray long-term memory behind ADK's ``BaseMemoryService``.

    from google.adk.runners import Runner
    from mnemoray.adk import MnemorayMemoryService

    runner = Runner(agent=agent, app_name="bird-chat", session_service=sessions,
                    memory_service=MnemorayMemoryService(memory))
    # or by URI: MnemorayMemoryService(uri="mnemoray:///srv/store"), "mnemoray://host:8000"

ADK's ``load_memory`` and ``preload_memory`` tools then recall distilled
mnemoray memories (session summaries, facts about the user, raw chunks)
instead of keyword-matched raw events.

The wrapped ``service`` is duck-typed: anything with ``add_session(session)``
taking a mnemoray :class:`~mnemoray.sessions.session.Session` and ``search(app_name,
user_id, query, top_k=..., filters=None)`` returning results that carry
``.memory`` and ``.score``: :class:`mnemoray.memory.service.service.MemoryService`
in-process, or :class:`mnemoray.adk.remote.RemoteMemorySource` for a running
``mnemoray serve``. ``add_memory`` / ``add_events_to_memory`` also need
``add_memories(memories)`` and ``delete_memory`` needs ``forget_memory(app,
user, memory_id, reason=...)``. Any method may be a coroutine function; plain
ones run in a worker thread (``offload=True``) so embedding does not block the
agent's event loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from typing_extensions import override

from mnemoray.adk.convert import ONLINE_SESSION, memory_entry, memory_from_entry
from mnemoray.adk.importer import session_from_adk
from mnemoray.errors import ConfigError, InvalidInput
from mnemoray.sessions.session import Session

if TYPE_CHECKING:
    from google.adk.events.event import Event as AdkEvent
    from google.adk.sessions.session import Session as AdkSession

# Why a memory was forgotten, on its tombstone (``mnemoray memory forgotten``).
DELETE_REASON = "deleted through ADK delete_memory"


class MemorySource(Protocol):
    """What :class:`MnemorayMemoryService` needs from a mnemoray memory service."""

    def add_session(self, session: Session) -> Any: ...

    def search(
        self, app_name: str, user_id: str, query: str, top_k: int = ..., filters: Any = None
    ) -> Any: ...


class MnemorayMemoryService(BaseMemoryService):
    """ADK memory service backed by mnemoray.

    ``service``: the mnemoray memory (see the module doc); or ``uri``, resolved by
    :func:`mnemoray.adk.uri.parse_uri` (ADK's ``services.yaml`` passes ``uri`` and
    ``agents_dir``). ``top_k``: memories per search (a URI's ``?top_k=`` wins);
    ``filters``: passed to every search (e.g. kinds or a time range); ``offload``:
    run synchronous service calls in a worker thread.
    """

    def __init__(
        self,
        service: MemorySource | None = None,
        *,
        uri: str | None = None,
        agents_dir: str | None = None,
        top_k: int = 5,
        filters: Any = None,
        offload: bool = True,
    ) -> None:
        if (service is None) == (uri is None):
            raise TypeError("pass either a mnemoray memory service or uri=...")
        if uri is not None:
            from mnemoray.adk.uri import parse_uri

            target = parse_uri(uri, agents_dir=agents_dir)
            service = target.memory_backend()
            top_k = target.top_k or top_k
        for name in ("add_session", "search"):
            if not callable(getattr(service, name, None)):
                raise TypeError(f"service: {type(service).__name__} has no {name}() method")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise InvalidInput(f"must be a positive int, got {top_k!r}", field="top_k")
        self.service: Any = service
        self.top_k = top_k
        self.filters = filters
        self.offload = offload

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        result = (
            await asyncio.to_thread(fn, *args, **kwargs) if self.offload else fn(*args, **kwargs)
        )
        return await result if inspect.isawaitable(result) else result

    def _method(self, name: str, adk_method: str) -> Callable[..., Any]:
        fn = getattr(self.service, name, None)
        if not callable(fn):
            raise ConfigError(
                f"{type(self.service).__name__} has no {name}(): {adk_method} needs it",
                field="service",
            )
        return fn

    @override
    async def add_session_to_memory(self, session: AdkSession) -> None:
        """Map the ADK session onto mnemoray's model and ingest it (idempotent:
        ADK may add one session several times as it grows; each copy replaces the
        summary of the one before)."""
        mapped = session_from_adk(session.model_dump(mode="json", by_alias=True))
        await self._call(self.service.add_session, mapped)

    @override
    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[AdkEvent],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Distill just these events (a delta, e.g. the latest turn) into memories of
        ``session_id``. They are added as records, not as a copy of the session, so
        they never count as an older copy; a later ``add_session_to_memory`` of the
        whole session replaces their summary. ``custom_metadata``: ``ttl_s``."""
        add = self._method("add_memories", "add_events_to_memory")
        unknown = sorted(set(custom_metadata or {}) - {"ttl_s"})
        if unknown:
            raise InvalidInput(f"unknown key {unknown[0]!r}; known: ttl_s", field="custom_metadata")
        if not events:
            return
        mapped = session_from_adk(
            {
                "app_name": app_name,
                "user_id": user_id,
                "id": session_id or ONLINE_SESSION,
                "events": [e.model_dump(mode="json", by_alias=True) for e in events],
            }
        )
        records = await self._call(self._distill, mapped, (custom_metadata or {}).get("ttl_s"))
        if records:
            await self._call(add, records)

    def _distill(self, session: Session, ttl_s: Any) -> list[Any]:
        from mnemoray.memory.records.distill import distill_session
        from mnemoray.summarizers import ExtractiveSummarizer

        if ttl_s is not None and (
            isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or ttl_s <= 0
        ):
            raise InvalidInput(
                f"must be a positive number of seconds, got {ttl_s!r}",
                field="custom_metadata.ttl_s",
            )
        # The wrapped service's own summarizer, app prompt and chunking when it has them
        # (in-process); a server's are out of reach, so its deltas are distilled here.
        summarizer = getattr(self.service, "summarizer", None) or ExtractiveSummarizer()
        prompt_of = getattr(self.service, "memory_prompt", None)
        prompt = prompt_of(session.app_name) if callable(prompt_of) else None
        if prompt is not None:
            summarizer = summarizer.with_prompt(prompt)
        ttl = float(ttl_s) if ttl_s is not None else getattr(self.service, "ttl_s", None)
        summarize_for = getattr(self.service, "summarize_for", None)  # raw chunks only?
        summarize = summarize_for(session.app_name) if callable(summarize_for) else True
        records = distill_session(
            session,
            summarizer,
            chunk_turns=getattr(self.service, "chunk_turns", 4),
            ttl_s=ttl,
            summarize=summarize,
        )
        scopes = getattr(self.service, "scopes", None)  # agent-only memories, in-process
        if scopes is not None:
            from mnemoray.memory.store.scopes import session_agent, stamp_agent

            records = stamp_agent(
                records, session_agent(session, scopes.memory_scope(session.app_name))
            )
        return records

    @override
    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Store these entries as raw memories (kind "fact" unless an entry's
        ``custom_metadata`` says ``kind``; also ``session_id``, ``topics``,
        ``key_facts``, ``entities``, ``source_event_ids``, ``ttl_s``, ``expires_at``).
        An entry's ``id`` becomes its memory id; adding it again adds nothing."""
        add = self._method("add_memories", "add_memory")
        records = [
            memory_from_entry(entry, app_name, user_id, f"memories[{i}]", custom_metadata)
            for i, entry in enumerate(memories)
        ]
        if records:
            await self._call(add, records)

    @override
    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        results = await self._call(
            self.service.search, app_name, user_id, query, top_k=self.top_k, filters=self.filters
        )
        return SearchMemoryResponse(
            memories=[memory_entry(r.memory, r.score) for r in results or ()]
        )

    @override
    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forget one memory (the ``MemoryEntry.id`` search answered). An id this
        user has no live memory under changes nothing, as deleting twice does."""
        if not memory_id:
            raise InvalidInput("must be a memory id from search_memory", field="memory_id")
        forget = self._method("forget_memory", "delete_memory")
        await self._call(forget, app_name, user_id, memory_id, reason=DELETE_REASON)


__all__ = ["DELETE_REASON", "MemorySource", "MnemorayMemoryService"]
