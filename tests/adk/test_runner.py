"""An ADK agent on mnemoray end to end: a real ``Runner`` and ``LlmAgent`` with
sessions, artifacts and memory resolved by ADK's own service factories from one
``mnemoray:///STORE`` URI.

The model is a small deterministic ``BaseLlm`` written here (a stand-in for
Gemini: it calls tools and answers from what they return); everything else is
the real ADK flow over the real mnemoray stores.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.cli.service_registry import load_services_module  # noqa: E402
from google.adk.cli.utils.service_factory import (  # noqa: E402
    create_artifact_service_from_options,
    create_memory_service_from_options,
    create_session_service_from_options,
)
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.tools.load_memory_tool import load_memory_tool  # noqa: E402
from google.adk.tools.preload_memory_tool import PreloadMemoryTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

from mnemoray.adk import (  # noqa: E402
    MnemorayArtifactService,
    MnemorayMemoryService,
    MnemoraySessionService,
    RemoteMemorySource,
    parse_uri,
    register,
)
from mnemoray.artifacts.files import FileArtifactStore  # noqa: E402
from mnemoray.errors import ConfigError, InvalidInput  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402
from mnemoray.sessions.sqlite.store import SQLiteSessionStore  # noqa: E402

APP, USER = "bird-chat", "maya"


def _texts(value: Any) -> list[str]:
    """Every "text" string in a tool's response (ADK hands it over as returned:
    load_memory's is a pydantic model)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, dict):
        return [
            t
            for k, v in value.items()
            for t in ([v] if k == "text" and isinstance(v, str) else _texts(v))
        ]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _said(content: types.Content) -> str:
    return " ".join(p.text or "" for p in content.parts or [])


class ScriptedModel(BaseLlm):
    """Calls ``find_birds`` when told about a parrot, ``load_memory`` when asked to
    remember, and answers a tool's result with what it returned."""

    model: str = "scripted"
    requests: list[LlmRequest] = Field(default_factory=list)

    @staticmethod
    def _reply(*parts: types.Part) -> LlmResponse:
        return LlmResponse(content=types.Content(role="model", parts=list(parts)))

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False):
        self.requests.append(llm_request)
        # preload_memory adds what it recalled as a user turn of its own: not the user.
        last = [c for c in llm_request.contents if "<PAST_CONVERSATIONS>" not in _said(c)][-1]
        answers = [p.function_response for p in last.parts or [] if p.function_response]
        if answers:
            answer = answers[0]
            if answer.name == "find_birds":
                text = f"In a small flat: {', '.join(answer.response['birds'])}."
            else:
                text = "From memory: " + " | ".join(_texts(answer.response))
            yield self._reply(types.Part(text=text))
            return
        said = _said(last).lower()
        if "parrot" in said:
            call = types.FunctionCall(name="find_birds", args={"size": "small"})
        elif "remember" in said:
            call = types.FunctionCall(name="load_memory", args={"query": "parrot pet flat"})
        else:
            yield self._reply(types.Part(text="Glad to help."))
            return
        yield self._reply(types.Part(function_call=call))


async def find_birds(size: str, tool_context: ToolContext) -> dict[str, Any]:
    """Birds that suit a home of the given size."""
    tool_context.state["user:pet"] = "parrot"  # the user's scope: every session
    tool_context.state["temp:scratch"] = "not kept"  # this invocation only
    tool_context.state["searches"] = 1  # this session
    await tool_context.save_artifact("user:shortlist.txt", types.Part(text="budgie, cockatiel"))
    await tool_context.save_artifact(
        "photo.png", types.Part(inline_data=types.Blob(data=b"\x89PNG fake", mime_type="image/png"))
    )
    return {"size": size, "birds": ["budgie", "cockatiel"]}


async def remember(callback_context: Any) -> None:
    """After each turn, the session goes to memory (ADK's own callback API)."""
    await callback_context.add_session_to_memory()


def _agent(model: ScriptedModel) -> LlmAgent:
    return LlmAgent(
        name="assistant",
        model=model,
        instruction="Help with pets.",
        tools=[find_birds, load_memory_tool, PreloadMemoryTool()],
        after_agent_callback=remember,
    )


async def _turn(runner: Runner, session_id: str, text: str) -> list[Any]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        e async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=message)
    ]


def _final_text(events: list[Any]) -> str:
    return "".join(p.text or "" for p in events[-1].content.parts)


def _services(uri: str, agents_dir: Path) -> tuple[Any, Any, Any]:
    """The three services as ``adk web --*_service_uri`` builds them."""
    return (
        create_session_service_from_options(base_dir=agents_dir, session_service_uri=uri),
        create_artifact_service_from_options(
            base_dir=agents_dir, artifact_service_uri=uri, strict_uri=True
        ),
        create_memory_service_from_options(base_dir=agents_dir, memory_service_uri=uri),
    )


def test_adk_agent_runs_on_mnemoray_end_to_end(tmp_path: Path) -> None:
    register()
    store = tmp_path / "store"
    uri = f"mnemoray://{store}?embedder=none&top_k=3"
    sessions, artifacts, memory = _services(uri, tmp_path)
    assert isinstance(sessions, MnemoraySessionService)
    assert isinstance(artifacts, MnemorayArtifactService)
    assert isinstance(memory, MnemorayMemoryService) and memory.top_k == 3
    model = ScriptedModel()

    async def run() -> tuple[str, str, str, list[Any]]:
        runner = Runner(
            app_name=APP,
            agent=_agent(model),
            session_service=sessions,
            artifact_service=artifacts,
            memory_service=memory,
        )
        first = await sessions.create_session(app_name=APP, user_id=USER)
        events = await _turn(runner, first.id, "I'd love a parrot but my flat is small.")
        assert _final_text(events) == "In a small flat: budgie, cockatiel."
        assert _final_text(await _turn(runner, first.id, "Thanks!")) == "Glad to help."

        second = await sessions.create_session(app_name=APP, user_id=USER)
        recalled = _final_text(
            await _turn(runner, second.id, "Do you remember what suits my small flat?")
        )
        return first.id, second.id, recalled, events

    first_id, second_id, recalled, turn_one = asyncio.run(run())

    # The later session recalled the earlier one through ADK's load_memory tool ...
    assert recalled.startswith("From memory: ") and "parrot" in recalled.lower()
    # ... and preload_memory put it in the request before the model ran.
    preloaded = [
        _said(c)
        for c in model.requests[-2].contents  # the one calling load_memory
        if "<PAST_CONVERSATIONS>" in _said(c)
    ]
    assert len(preloaded) == 1 and "parrot" in preloaded[0].lower()

    async def reread() -> None:
        # A fresh process: new services from the same URI see everything.
        sessions2, artifacts2, memory2 = _services(uri, tmp_path)
        s1 = await sessions2.get_session(app_name=APP, user_id=USER, session_id=first_id)
        assert s1 is not None
        kinds = [
            (
                "call"
                if e.get_function_calls()
                else "result"
                if e.get_function_responses()
                else e.author
            )
            for e in s1.events
        ]
        assert kinds == ["user", "call", "result", "assistant", "user", "assistant"]
        # ADK reads back exactly the events it appended.
        assert [e.model_dump() for e in s1.events[1:4]] == [e.model_dump() for e in turn_one]
        assert s1.state["user:pet"] == "parrot" and s1.state["searches"] == 1
        assert "temp:scratch" not in s1.state
        call = s1.events[1].get_function_calls()[0]
        assert call.name == "find_birds" and call.args == {"size": "small"}
        assert s1.events[2].actions.artifact_delta == {"user:shortlist.txt": 0, "photo.png": 0}
        assert await sessions2.get_user_state(app_name=APP, user_id=USER) == {"pet": "parrot"}
        s2 = await sessions2.get_session(app_name=APP, user_id=USER, session_id=second_id)
        assert s2 is not None and s2.state["user:pet"] == "parrot"
        assert "searches" not in s2.state
        listed = await sessions2.list_sessions(app_name=APP, user_id=USER)
        assert [s.id for s in listed.sessions] == [first_id, second_id]
        assert await artifacts2.list_artifact_keys(
            app_name=APP, user_id=USER, session_id=second_id
        ) == ["user:shortlist.txt"]
        photo = await artifacts2.load_artifact(
            app_name=APP, user_id=USER, filename="photo.png", session_id=first_id
        )
        assert photo is not None and photo.inline_data.data == b"\x89PNG fake"
        found = await memory2.search_memory(app_name=APP, user_id=USER, query="parrot flat")
        assert found.memories and {m.custom_metadata["session_id"] for m in found.memories} <= {
            first_id,
            second_id,
        }

    asyncio.run(reread())

    # mnemoray's own view of the same files: typed events, artifacts, memories.
    native = SQLiteSessionStore(store / "sessions.db")
    try:
        s1 = native.get_session(APP, USER, first_id)
    finally:
        native.close()
    assert [e.type for e in s1.events] == [
        "message",
        "tool_call",
        "tool_result",
        "message",
        "message",
        "message",
    ]
    assert s1.events[1].data["name"] == "find_birds"
    assert s1.events[2].data["response"]["birds"] == ["budgie", "cockatiel"]
    files = FileArtifactStore(store / "artifacts")
    assert files.load(APP, USER, "~", "user:shortlist.txt").text() == "budgie, cockatiel"
    assert files.load(APP, USER, first_id, "photo.png").mime_type == "image/png"
    results = MemoryService.open(store, embedder=None).search(APP, USER, "parrot small flat")
    assert results and results[0].memory.session_id == first_id
    assert "parrot" in results[0].memory.text.lower()


def test_services_yaml_names_the_classes(tmp_path: Path) -> None:
    """ADK's other registration path: ``services.yaml`` in the agent directory."""
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "services.yaml").write_text(
        "services:\n"
        "  - {scheme: mnemoray, type: memory, class: mnemoray.adk.MnemorayMemoryService}\n"
        "  - {scheme: mnemoray, type: session, class: mnemoray.adk.MnemoraySessionService}\n"
        "  - {scheme: mnemoray, type: artifact, class: mnemoray.adk.MnemorayArtifactService}\n"
    )
    load_services_module(str(agent_dir))
    sessions, artifacts, memory = _services(f"mnemoray://{tmp_path / 's'}?embedder=none", tmp_path)
    assert isinstance(sessions, MnemoraySessionService)
    assert isinstance(artifacts, MnemorayArtifactService)
    assert isinstance(memory, MnemorayMemoryService)
    assert (tmp_path / "s" / "sessions.db").exists()


def test_uri_errors_name_what_is_wrong(tmp_path: Path) -> None:
    cases = {
        "mnemoray://": "name a store directory",
        "mnemoray:///x?embeder=none": "unknown option 'embeder'",
        "mnemoray:///x?top_k=0": "top_k must be a positive int",
        "mnemoray://me:secret@host:8000": "no credentials in the URI",
        "mnemoray+https:///x": "names a server",
        "memory://": "scheme must be one of",
    }
    for uri, message in cases.items():
        with pytest.raises(InvalidInput, match=message):
            MnemorayMemoryService(uri=uri)
    # A server URI serves memory; sessions and artifacts need the store's files.
    with pytest.raises(ConfigError, match="serves memory only"):
        MnemoraySessionService(uri="mnemoray://127.0.0.1:9")
    with pytest.raises(ConfigError, match="serves memory only"):
        MnemorayArtifactService(uri="mnemoray://127.0.0.1:9")
    remote = MnemorayMemoryService(uri="mnemoray+https://mem.example/v?top_k=2")
    assert remote.top_k == 2 and isinstance(remote.service, RemoteMemorySource)
    assert parse_uri("mnemoray+https://mem.example/v/").base_url == "https://mem.example/v"
    assert parse_uri("mnemoray:rel/store").store == Path("rel/store").absolute()
    with pytest.raises(TypeError, match="either"):
        MnemoraySessionService()
