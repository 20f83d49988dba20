from __future__ import annotations

import copy
import json

import pytest

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import (
    AgentSpec,
    CompileContext,
    Compiler,
    MemorySnippet,
    Services,
    UnknownProcessorError,
)
from mnemoray.compiler.context import text_content
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message

# The stable layout: the system instruction's blocks from the least to the most changing.
DEFAULT_ORDER = [
    "static_instruction",
    "identity",
    "user_profile",
    "instruction",
    "history",
    "tool_results",
    "memory_preload",
    "artifacts",
    "token_budget",
]


class Note:
    """A custom processor: adds a dynamic system note."""

    def __init__(self, name: str = "note", text: str = "Today is Tuesday.") -> None:
        self.name = name
        self.text = text

    def process(self, ctx: CompileContext) -> None:
        ctx.add_instruction(self.text)
        ctx.detail["chars"] = len(self.text)


class DropOtherAgents:
    """A custom filter: removes narrative about other agents."""

    name = "drop_other_agents"

    def process(self, ctx: CompileContext) -> None:
        removed = ctx.remove_contents(
            i for i, c in enumerate(ctx.contents) if c.text.startswith("For context:")
        )
        ctx.detail["removed"] = len(removed)


def test_default_order():
    assert Compiler.default().names == DEFAULT_ORDER


PROFILE = {
    "sessions": 3,
    "expertise": [{"topic": "roses", "depth": "expert"}],
    "style": {"turns": 0},
    "declined": [],
    "store_version": 7,
}


def test_the_default_layout_goes_from_stable_to_state_dependent(make_session):
    session = make_session(user_message("hi"))
    agent = AgentSpec(
        name="alpha",
        description="Gardens.",
        static_instruction="Static.",
        instruction="Mood: {mood}.",
        user_profile=True,
    )
    services = Services(user_profile=lambda app, user: PROFILE)

    def compiled(mood: str):
        return Compiler.default().compile(session, agent, "bye", services, {"mood": mood})

    calm, angry = compiled("calm"), compiled("angry")
    blocks = calm.system_instruction.split("\n\n")
    assert blocks[0] == "Static."
    assert blocks[1].startswith("You are an agent.") and '"alpha"' in blocks[1]
    assert blocks[2].startswith("<user_profile>") and blocks[2].endswith("</user_profile>")
    assert blocks[3:] == ["Mood: calm."]
    # A change of state moves only the last block: what comes before it stays a prefix.
    prefix = "\n\n".join(blocks[:3])
    assert angry.system_instruction == prefix + "\n\nMood: angry."


def test_insert_remove_replace_by_name(make_session):
    compiler = Compiler.default()
    compiler.insert_after("identity", Note()).insert_before("token_budget", DropOtherAgents())
    assert compiler.names == [
        "static_instruction",
        "identity",
        "note",
        "user_profile",
        "instruction",
        "history",
        "tool_results",
        "memory_preload",
        "artifacts",
        "drop_other_agents",
        "token_budget",
    ]
    session = make_session(user_message("hi"), model_message("beta", "I am beta"))
    req = compiler.compile(session, AgentSpec(name="alpha", static_instruction="S."))
    assert req.system_instruction.endswith('"alpha".\n\nToday is Tuesday.')
    assert [c.text for c in req.contents] == ["hi"]
    assert next(s for s in req.trace if s.name == "drop_other_agents").detail == {"removed": 1}

    compiler.replace("note", Note(text="Today is Friday.")).remove("identity")
    req = compiler.compile(session, AgentSpec(name="alpha", static_instruction="S."))
    assert req.system_instruction == "S.\n\nToday is Friday."
    assert "identity" not in compiler.names


def test_unknown_and_duplicate_names_are_clear_errors():
    compiler = Compiler.default()
    for call in (
        lambda: compiler.remove("nope"),
        lambda: compiler.replace("nope", Note()),
        lambda: compiler.insert_before("nope", Note()),
        lambda: compiler.insert_after("nope", Note()),
    ):
        with pytest.raises(UnknownProcessorError, match="'nope'.*static_instruction"):
            call()
    with pytest.raises(ValueError, match="already"):
        compiler.insert_after("history", Note(name="identity"))
    for own in ("agent_tools", "cacheable_prefix"):  # the trace's entries without a processor
        with pytest.raises(ValueError, match="compiler's own"):
            compiler.insert_after("history", Note(name=own))
    with pytest.raises(TypeError, match="not a processor"):
        compiler.insert_after("history", object())  # type: ignore[arg-type]


def test_trace_times_every_step_and_tokens_add_up(make_session):
    session = make_session(user_message("hi"), model_message("alpha", "hello"))
    agent = AgentSpec(
        name="alpha",
        static_instruction="Static.",
        instruction="Be kind.",
        tools=[{"name": "lookup", "parameters": {"type": "object"}}],
    )
    req = Compiler.default().compile(session, agent, new_message="bye")
    assert [s.name for s in req.trace] == ["agent_tools", *DEFAULT_ORDER, "cacheable_prefix"]
    assert sum(s.tokens_added for s in req.trace) == req.total_tokens
    assert all(s.micros >= 0 for s in req.trace)
    assert req.total_tokens == (
        req.static_prefix_tokens
        + sum(c.tokens for c in req.contents)
        + next(s.tokens_added for s in req.trace if s.name == "agent_tools")
        + sum(s.tokens_added for s in req.trace if s.name in ("instruction", "identity"))
    )


def test_compile_does_not_mutate_the_session(make_session):
    store = InMemoryArtifactStore()
    store.save("app", "u1", "s1", "notes.txt", "some notes", summary="notes")
    session = make_session(
        user_message("load my notes", state_delta={"user:name": "Dana"}),
        tool_call("alpha", "load_artifacts", {"artifact_names": ["notes.txt"]}, call_id="l"),
        tool_result("alpha", "load_artifacts", {"artifact_names": ["notes.txt"]}, call_id="l"),
    )
    before = copy.deepcopy(session.to_dict())
    events_before = list(session.events)
    agent = AgentSpec(
        name="alpha",
        instruction="Hi {user:name}, {temp:mood}",
        token_budget=30,
        memory_preload=True,
    )
    services = Services(
        artifacts=store,
        memory_search=lambda a, u, q, k: [MemorySnippet("m1", "Dana likes tea.", 0.9)],
    )
    Compiler.default().compile(
        session,
        agent,
        new_message="summarise",
        services=services,
        temp_state={"temp:mood": "happy"},
    )
    assert session.to_dict() == before
    assert all(a is b for a, b in zip(session.events, events_before, strict=True))
    assert store.list_versions("app", "u1", "s1", "notes.txt") == [0]


def test_to_dict_is_json_ready(make_session):
    session = make_session(
        user_message("hi"),
        tool_call("alpha", "calc", {"x": [1, 2]}, call_id="c"),
        tool_result("alpha", "calc", {"sum": 3}, call_id="c"),
    )
    req = Compiler.default().compile(
        session, AgentSpec(name="alpha", token_budget=1000), new_message="thanks"
    )
    data = json.loads(json.dumps(req.to_dict()))
    assert data["contents"][1]["parts"][0] == {
        "function_call": {"name": "calc", "args": {"x": [1, 2]}, "id": "c"}
    }
    assert data["prefix_hash"] == req.prefix_hash
    assert {"name", "tokens_added", "micros", "detail"} <= set(data["trace"][0])


def test_processors_can_add_contents_with_tracked_tokens(make_session):
    class Reminder:
        name = "reminder"

        def process(self, ctx: CompileContext) -> None:
            ctx.add_content(text_content("user", "Reminder: be concise."), 0)

    compiler = Compiler.default().insert_after("history", Reminder())
    req = compiler.compile(make_session(user_message("hi")), AgentSpec(name="a"))
    assert req.contents[0].text == "Reminder: be concise."
    step = next(s for s in req.trace if s.name == "reminder")
    assert step.tokens_added == req.contents[0].tokens == 6  # words + ":" and "."
