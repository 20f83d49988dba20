"""The ADK session and artifact services over mnemoray's stores, call by call, and
the memory service's whole ``BaseMemoryService`` API in-process and against a
real HTTP server (``build_api`` over a real MemoryService, served by uvicorn)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")

import uvicorn  # noqa: E402
from google.adk.errors import StaleSessionError  # noqa: E402
from google.adk.events import Event as AdkEvent  # noqa: E402
from google.adk.events import EventActions  # noqa: E402
from google.adk.memory.memory_entry import MemoryEntry  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.adk.sessions.session import Session as AdkSession  # noqa: E402
from google.genai import types  # noqa: E402

from mnemoray.adk import (  # noqa: E402
    MnemorayArtifactService,
    MnemorayMemoryService,
    MnemoraySessionService,
)
from mnemoray.adk.artifacts import PART_MIME  # noqa: E402
from mnemoray.artifacts.store import InMemoryArtifactStore  # noqa: E402
from mnemoray.errors import Conflict, InvalidInput  # noqa: E402
from mnemoray.http.app import build_api  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402
from mnemoray.sessions.events import Event  # noqa: E402
from mnemoray.sessions.store import InMemorySessionStore  # noqa: E402
from mnemoray.sessions.types import StaleSessionError as MnemorayStaleSessionError  # noqa: E402
from tests.support.factories import T2026 as T0  # noqa: E402
from tests.support.service_backend import ServiceBackend  # noqa: E402

APP, USER = "bird-chat", "maya"


def _said(author: str, text: str, ts: float, **actions: Any) -> AdkEvent:
    role = "user" if author == "user" else "model"
    return AdkEvent(
        author=author,
        invocation_id="inv",
        timestamp=ts,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(**actions),
    )


# -- sessions -------------------------------------------------------------------------
def test_session_service_keeps_scopes_versions_and_native_events() -> None:
    store = InMemorySessionStore()
    sessions = MnemoraySessionService(store, offload=False)

    async def run() -> None:
        s = await sessions.create_session(
            app_name=APP,
            user_id=USER,
            session_id="s1",
            state={"user:name": "Maya", "topic": "birds", "temp:x": 1},
        )
        assert s.state == {"user:name": "Maya", "topic": "birds"}
        with pytest.raises(Conflict):
            await sessions.create_session(app_name=APP, user_id=USER, session_id="s1")
        await sessions.append_event(
            s,
            _said(
                "user", "hi", T0, state_delta={"app:mode": "calm", "temp:draft": "x", "turns": 1}
            ),
        )
        await sessions.append_event(s, _said("assistant", "hello", T0 + 1))
        # temp: keys reach this copy for the invocation, never the store.
        assert s.state["temp:draft"] == "x"
        partial = _said("assistant", "hel", T0 + 2)
        partial.partial = True
        assert await sessions.append_event(s, partial) is partial
        stored = store.get_session(APP, USER, "s1")
        assert [e.text for e in stored.events] == ["hi", "hello"]
        assert stored.state == {
            "user:name": "Maya",
            "topic": "birds",
            "app:mode": "calm",
            "turns": 1,
        }
        assert s.last_update_time == stored.updated_at

        # A second copy appends; the first is now stale and may not overwrite it.
        other = await sessions.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert other is not None and [e.id for e in other.events] == [e.id for e in s.events]
        await sessions.append_event(other, _said("user", "from elsewhere", T0 + 3))
        with pytest.raises(StaleSessionError, match="reload") as stale:
            await sessions.append_event(s, _said("user", "lost?", T0 + 4))
        assert isinstance(stale.value, MnemorayStaleSessionError)  # either except works
        assert len(store.get_session(APP, USER, "s1").events) == 3

        # A compaction mnemoray wrote meanwhile is no conflict, and ADK reads it as one.
        native = store.get_session(APP, USER, "s1")
        store.append_event(
            native,
            Event(
                author="mnemoray",
                role="model",
                type="compaction",
                text="Maya greeted us.",
                timestamp=T0 + 5,
                data={"start_ts": T0, "end_ts": T0 + 1, "summary": "Maya greeted us."},
            ),
        )
        await sessions.append_event(other, _said("user", "still here", T0 + 6))
        again = await sessions.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert again is not None
        compaction = again.events[3].actions.compaction
        assert compaction is not None and compaction.end_timestamp == T0 + 1
        assert compaction.compacted_content.parts[0].text == "Maya greeted us."
        recent = await sessions.get_session(
            app_name=APP,
            user_id=USER,
            session_id="s1",
            config=GetSessionConfig(num_recent_events=2),
        )
        assert recent is not None and len(recent.events) == 2
        assert recent.events[0].actions.compaction is not None
        assert recent.events[1].content.parts[0].text == "still here"
        late = await sessions.get_session(
            app_name=APP,
            user_id=USER,
            session_id="s1",
            config=GetSessionConfig(after_timestamp=T0 + 3),
        )
        assert late is not None and len(late.events) == 3

        await sessions.create_session(app_name=APP, user_id=USER, session_id="s0")
        # A session object built by hand carries no version: it appends to the current copy.
        by_hand = AdkSession(id="s0", app_name=APP, user_id=USER)
        await sessions.append_event(by_hand, _said("user", "typed by hand", T0 + 7))
        assert [e.text for e in store.get_session(APP, USER, "s0").events] == ["typed by hand"]
        listed = await sessions.list_sessions(app_name=APP, user_id=USER)
        assert [x.id for x in listed.sessions] == ["s1", "s0"]  # oldest update first
        assert all(not x.events for x in listed.sessions)
        assert await sessions.get_user_state(app_name=APP, user_id=USER) == {"name": "Maya"}
        assert await sessions.get_user_state(app_name=APP, user_id="nobody") == {}
        await sessions.delete_session(app_name=APP, user_id=USER, session_id="s1")
        await sessions.delete_session(app_name=APP, user_id=USER, session_id="s1")
        assert await sessions.get_session(app_name=APP, user_id=USER, session_id="s1") is None

    asyncio.run(run())


# -- artifacts ------------------------------------------------------------------------
def test_artifact_service_round_trips_parts_scopes_and_versions() -> None:
    store = InMemoryArtifactStore()
    artifacts = MnemorayArtifactService(store)
    scope = {"app_name": APP, "user_id": USER}

    async def run() -> None:
        text = types.Part(text="budgie, cockatiel")
        blob = types.Part(inline_data=types.Blob(data=b"\x00\x01", mime_type="image/png"))
        ref = types.Part(
            file_data=types.FileData(file_uri="gs://b/x.pdf", mime_type="application/pdf")
        )
        assert (
            await artifacts.save_artifact(
                **scope,
                filename="notes.txt",
                artifact=text,
                session_id="s1",
                custom_metadata={"summary": "two birds"},
            )
            == 0
        )
        assert (
            await artifacts.save_artifact(
                **scope, filename="notes.txt", artifact=blob, session_id="s1"
            )
            == 1
        )
        assert (
            await artifacts.save_artifact(
                **scope, filename="user:doc", artifact=ref, custom_metadata={"source": "upload"}
            )
            == 0
        )
        # Native where mnemoray can show it: text, and bytes with their mime type.
        assert store.load(APP, USER, "s1", "notes.txt", 0).text() == "budgie, cockatiel"
        assert store.load(APP, USER, "s1", "notes.txt", 0).summary == "two birds"
        assert store.load(APP, USER, "s1", "notes.txt").mime_type == "image/png"
        assert store.load(APP, USER, "~", "user:doc").mime_type == PART_MIME

        load = artifacts.load_artifact
        assert await load(**scope, filename="notes.txt", session_id="s1", version=0) == text
        assert await load(**scope, filename="notes.txt", session_id="s1") == blob
        assert await load(**scope, filename="user:doc") == ref
        assert await load(**scope, filename="user:doc", session_id="s9") == ref
        assert await load(**scope, filename="notes.txt", session_id="s1", version=7) is None
        assert await load(**scope, filename="nothing", session_id="s1") is None

        keys = artifacts.list_artifact_keys
        assert await keys(**scope, session_id="s1") == ["notes.txt", "user:doc"]
        assert await keys(**scope) == ["user:doc"]
        assert await artifacts.list_versions(**scope, filename="notes.txt", session_id="s1") == [
            0,
            1,
        ]
        versions = await artifacts.list_artifact_versions(
            **scope, filename="notes.txt", session_id="s1"
        )
        assert [(v.version, v.mime_type, v.custom_metadata) for v in versions] == [
            (0, "text/plain", {"summary": "two birds"}),
            (1, "image/png", {}),
        ]
        assert versions[0].canonical_uri == "artifact://bird-chat/maya/s1/notes.txt@0"
        doc = await artifacts.get_artifact_version(**scope, filename="user:doc")
        assert doc is not None and doc.custom_metadata == {"source": "upload"}
        assert doc.mime_type == "application/pdf"
        assert await artifacts.get_artifact_version(**scope, filename="user:doc", version=3) is None

        # An ADK artifact reference is followed, within the caller's scope.
        target = "artifact://apps/bird-chat/users/maya/sessions/s1/artifacts/notes.txt/versions/0"
        await artifacts.save_artifact(
            **scope,
            filename="link",
            session_id="s1",
            artifact=types.Part(file_data=types.FileData(file_uri=target)),
        )
        assert await load(**scope, filename="link", session_id="s1") == text

        with pytest.raises(InvalidInput, match="session_id"):
            await artifacts.save_artifact(**scope, filename="notes.txt", artifact=text)
        await artifacts.delete_artifact(**scope, filename="notes.txt", session_id="s1")
        await artifacts.delete_artifact(**scope, filename="notes.txt", session_id="s1")
        assert await keys(**scope, session_id="s1") == ["link", "user:doc"]

    asyncio.run(run())


# -- memory: the whole BaseMemoryService API ----------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``mnemoray serve``'s HTTP app over a real MemoryService, on a real port."""
    service = MemoryService.open(tmp_path / "remote", embedder=None)
    port = _free_port()
    app_server = uvicorn.Server(
        uvicorn.Config(
            build_api(ServiceBackend(service)), host="127.0.0.1", port=port, log_level="error"
        )
    )
    thread = threading.Thread(target=app_server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not app_server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"mnemoray://127.0.0.1:{port}"
    app_server.should_exit = True
    thread.join(10)


def _memory_api(memory: MnemorayMemoryService) -> None:
    async def run() -> None:
        scope = {"app_name": APP, "user_id": USER}
        # add_memory: explicit entries; the id is kept, adding again adds nothing.
        fact = MemoryEntry(
            id="diet-1",
            content=types.Content(
                role="user",
                parts=[types.Part(text="Maya's parrot eats seeds and fresh fruit every morning.")],
            ),
            timestamp="2026-01-05T09:00:00Z",
            custom_metadata={"topics": ["diet"]},
        )
        await memory.add_memory(**scope, memories=[fact])
        await memory.add_memory(**scope, memories=[fact])
        found = await memory.search_memory(**scope, query="what does the parrot eat")
        assert [m.id for m in found.memories] == ["diet-1"]
        hit = found.memories[0]
        assert hit.custom_metadata["topics"] == ["diet"] and hit.custom_metadata["kind"] == "fact"
        assert hit.timestamp == "2026-01-05T09:00:00Z"
        other = await memory.search_memory(app_name=APP, user_id="else", query="parrot")
        assert other.memories == []

        # add_events_to_memory: a delta (the latest turn), scoped to its session.
        turn = [
            _said("user", "My cockatiel Kiwi learned to whistle a tune.", T0),
            _said("assistant", "Kiwi sounds talented!", T0 + 1),
        ]
        await memory.add_events_to_memory(**scope, events=turn, session_id="s7")
        kiwi = await memory.search_memory(**scope, query="Kiwi whistle")
        assert kiwi.memories and {m.custom_metadata["session_id"] for m in kiwi.memories} == {"s7"}
        assert any("whistle" in m.content.parts[0].text for m in kiwi.memories)

        # delete_memory: the id search answered; deleting twice changes nothing.
        await memory.delete_memory(**scope, memory_id="diet-1")
        await memory.delete_memory(**scope, memory_id="diet-1")
        gone = await memory.search_memory(**scope, query="what does the parrot eat seeds")
        assert "diet-1" not in [m.id for m in gone.memories]

        with pytest.raises(InvalidInput, match="memory_id"):
            await memory.delete_memory(**scope)
        with pytest.raises(InvalidInput, match="unknown key 'colour'"):
            await memory.add_memory(
                **scope,
                memories=[
                    MemoryEntry(
                        content=types.Content(parts=[types.Part(text="x")]),
                        custom_metadata={"colour": "grey"},
                    )
                ],
            )
        with pytest.raises(InvalidInput, match="no text part"):
            await memory.add_memory(
                **scope,
                memories=[
                    MemoryEntry(
                        content=types.Content(
                            parts=[types.Part(function_call=types.FunctionCall(name="f"))]
                        )
                    )
                ],
            )

    asyncio.run(run())


def test_memory_service_whole_api_in_process(tmp_path: Path) -> None:
    service = MemoryService.open(tmp_path / "store", embedder=None)
    _memory_api(MnemorayMemoryService(service))
    forgotten = service.forgotten(APP, USER)
    assert forgotten and forgotten[-1]["reason"] == "deleted through ADK delete_memory"


def test_memory_service_whole_api_against_a_server(server: str) -> None:
    _memory_api(MnemorayMemoryService(uri=server))
