"""MnemorayMemoryService with the real google-adk package and the real embedder.

The wrapped service is a tiny real one built here on distill_session, the
packaged all-MiniLM-L6-v2 and numpy cosine similarity: it satisfies the
duck-typed interface MnemorayMemoryService expects of mnemoray's MemoryService.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.invocation_context import InvocationContext  # noqa: E402
from google.adk.events import Event as AdkEvent  # noqa: E402
from google.adk.memory import BaseMemoryService  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.sessions.session import Session as AdkSession  # noqa: E402
from google.adk.tools.preload_memory_tool import PreloadMemoryTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402

from mnemoray.adk.convert import memory_entry
from mnemoray.adk.memory import MnemorayMemoryService  # noqa: E402
from mnemoray.embedders import Embedder, open_embedder  # noqa: E402
from mnemoray.memory.records.distill import distill_session  # noqa: E402
from mnemoray.memory.records.record import Memory  # noqa: E402
from mnemoray.sessions.events import iso  # noqa: E402
from mnemoray.sessions.session import Session  # noqa: E402
from mnemoray.summarizers import ExtractiveSummarizer  # noqa: E402

APP, USER = "bird-chat", "user-123"


@dataclass(frozen=True)
class Result:
    memory: Memory
    score: float


class TinyMemoryService:
    """distill -> embed key_text -> cosine search, per (app, user)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.rows: dict[str, Memory] = {}
        self.added: list[Session] = []

    def add_session(self, session: Session) -> int:
        self.added.append(session)
        new = [
            r
            for r in distill_session(session, ExtractiveSummarizer())
            if r.memory_id not in self.rows
        ]
        vectors = self.embedder.encode([r.key_text for r in new])
        for record, vector in zip(new, vectors, strict=True):
            self.rows[record.memory_id] = record.with_embedding(vector)
        return len(new)

    def search(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int = 5,
        filters: dict[str, Any] | None = None,
    ) -> list[Result]:
        kinds = (filters or {}).get("kinds")
        rows = [
            m
            for m in self.rows.values()
            if (m.app_name, m.user_id) == (app_name, user_id) and (kinds is None or m.kind in kinds)
        ]
        if not rows:
            return []
        q = self.embedder.encode([query])[0]
        scores = np.stack([m.embedding for m in rows]) @ q  # type: ignore[misc]
        ranked = sorted(
            zip(scores.tolist(), rows, strict=True), key=lambda p: (-p[0], p[1].memory_id)
        )
        return [Result(m, s) for s, m in ranked[:top_k]]


class AsyncTinyMemoryService(TinyMemoryService):
    async def add_session(self, session: Session) -> int:  # type: ignore[override]
        return super().add_session(session)

    async def search(self, *args: Any, **kwargs: Any) -> list[Result]:  # type: ignore[override]
        return super().search(*args, **kwargs)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = open_embedder("default")
    assert loaded is not None
    return loaded


def text_event(author: str, role: str, text: str, invocation: str) -> AdkEvent:
    return AdkEvent(
        author=author,
        invocation_id=invocation,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
    )


async def parrot_session(sessions: InMemorySessionService, user_id: str = USER) -> AdkSession:
    """The parrot conversation (the first session), written through ADK's own session service."""
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    turns = [
        text_event(
            "user", "user", "I'm thinking about getting a pet parrot. What should I know?", "i1"
        ),
        text_event(
            "assistant",
            "model",
            "Parrots are social and need daily attention, a big cage and a varied diet.",
            "i1",
        ),
        text_event(
            "user",
            "user",
            "I really like African Grey parrots because they can "
            "talk. My apartment is small though.",
            "i2",
        ),
        AdkEvent(
            author="assistant",
            invocation_id="i2",
            content=types.Content(
                role="model",
                parts=[
                    types.Part(
                        function_call=types.FunctionCall(
                            id="call-1", name="search_birds", args={"size": "small"}
                        )
                    )
                ],
            ),
        ),
        AdkEvent(
            author="assistant",
            invocation_id="i2",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="call-1",
                            name="search_birds",
                            response={"birds": ["budgie", "cockatiel"]},
                        )
                    )
                ],
            ),
        ),
        text_event(
            "assistant",
            "model",
            "African Greys need space; in a small apartment budgies or cockatiels are easier.",
            "i2",
        ),
    ]
    for event in turns:
        await sessions.append_event(session, event)
    return await sessions.get_session(app_name=APP, user_id=user_id, session_id=session.id)


def test_is_a_complete_adk_memory_service(embedder: Embedder) -> None:
    service = MnemorayMemoryService(TinyMemoryService(embedder))
    assert isinstance(service, BaseMemoryService)  # every abstract method implemented
    with pytest.raises(TypeError, match="no add_session"):
        MnemorayMemoryService(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k"):
        MnemorayMemoryService(TinyMemoryService(embedder), top_k=0)


def test_add_session_and_search(embedder: Embedder) -> None:
    async def run() -> None:
        sessions = InMemorySessionService()
        adk_session = await parrot_session(sessions)
        backend = TinyMemoryService(embedder)
        memory = MnemorayMemoryService(backend, top_k=3)
        await memory.add_session_to_memory(adk_session)

        mapped = backend.added[0]
        assert (mapped.app_name, mapped.user_id, mapped.session_id) == (APP, USER, adk_session.id)
        adk_ids = {e.id for e in adk_session.events}
        assert {e.id for e in mapped.events} <= adk_ids
        assert [e.type for e in mapped.events] == [
            "message",
            "message",
            "message",
            "tool_call",
            "tool_result",
            "message",
        ]

        # A paraphrase: no word of "parrot" in the query.
        response = await memory.search_memory(
            app_name=APP,
            user_id=USER,
            query="remember that pet we talked about? suggestions for my small space",
        )
        assert 0 < len(response.memories) <= 3
        top = response.memories[0]
        text = top.content.parts[0].text
        assert top.content.role == "user" and ("parrot" in text.lower() or "budgie" in text)
        record = backend.rows[top.id]
        assert text == record.text
        assert top.timestamp == iso(record.event_time_start)
        meta = top.custom_metadata
        assert meta["kind"] == record.kind and meta["session_id"] == adk_session.id
        assert set(meta["source_event_ids"]) <= {e.id for e in mapped.events}
        assert meta["score"] == pytest.approx(
            float(
                record.embedding
                @ embedder.encode(
                    ["remember that pet we talked about? suggestions for my small space"]
                )[0]
            ),
            abs=1e-5,
        )
        scores = [m.custom_metadata["score"] for m in response.memories]
        assert scores == sorted(scores, reverse=True)

        # Scoped to the user; ADK may add a session again: nothing doubles.
        other = await memory.search_memory(app_name=APP, user_id="someone-else", query="parrot")
        assert other.memories == []
        count = len(backend.rows)
        await memory.add_session_to_memory(adk_session)
        assert len(backend.rows) == count

    asyncio.run(run())


def test_filters_and_async_backends(embedder: Embedder) -> None:
    async def run() -> None:
        sessions = InMemorySessionService()
        adk_session = await parrot_session(sessions)
        memory = MnemorayMemoryService(
            AsyncTinyMemoryService(embedder), top_k=2, filters={"kinds": ["fact"]}
        )
        await memory.add_session_to_memory(adk_session)
        response = await memory.search_memory(
            app_name=APP, user_id=USER, query="what bird does the user like?"
        )
        assert len(response.memories) == 2
        assert {m.custom_metadata["kind"] for m in response.memories} == {"fact"}
        assert {m.author for m in response.memories} == {"user"}
        texts = [m.content.parts[0].text for m in response.memories]
        assert "I really like African Grey parrots because they can talk." in texts

    asyncio.run(run())


def test_adk_preload_memory_tool_injects_recalled_memories(embedder: Embedder) -> None:
    """ADK's own PreloadMemoryTool, through a real InvocationContext/ToolContext."""

    async def run() -> None:
        sessions = InMemorySessionService()
        await parrot_session(sessions)
        memory = MnemorayMemoryService(TinyMemoryService(embedder), top_k=2)
        listed = await sessions.list_sessions(app_name=APP, user_id=USER)
        for info in listed.sessions:
            full = await sessions.get_session(app_name=APP, user_id=USER, session_id=info.id)
            assert full is not None
            await memory.add_session_to_memory(full)

        new_session = await sessions.create_session(app_name=APP, user_id=USER)
        question = types.Content(
            role="user",
            parts=[
                types.Part(
                    text="Hey, remember that pet we talked about? "
                    "Any other ideas for my small space?"
                )
            ],
        )
        context = InvocationContext(
            session_service=sessions,
            memory_service=memory,
            invocation_id="inv-1",
            agent=LlmAgent(name="assistant"),
            session=new_session,
            user_content=question,
        )
        request = LlmRequest()
        await PreloadMemoryTool().process_llm_request(
            tool_context=ToolContext(context), llm_request=request
        )
        injected = " ".join(p.text or "" for c in request.contents for p in c.parts or [])
        assert "<PAST_CONVERSATIONS>" in injected
        assert "parrot" in injected.lower()

    asyncio.run(run())


def test_memory_entry_mapping_without_score() -> None:
    record = Memory(
        APP,
        USER,
        "s1",
        "chunk",
        "[2026-01-05] user: hi parrot",
        source_event_ids=("e1",),
        event_time_start=1767571200.0,
        event_time_end=1767571260.0,
        topics=("parrot",),
    )
    entry = memory_entry(record)
    assert entry.id == record.memory_id and entry.author is None
    assert entry.timestamp == "2026-01-05T00:00:00Z"
    assert entry.custom_metadata == {
        "kind": "chunk",
        "session_id": "s1",
        "source_event_ids": ["e1"],
        "topics": ["parrot"],
        "event_time_end": "2026-01-05T00:01:00Z",
    }
