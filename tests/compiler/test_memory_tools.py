"""The compiler's own tools are opt-in per agent (``AgentSpec.memory_tools``, none by
default), and load_memory takes a ``limit`` the model chooses within a bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import LOAD_ARTIFACTS_TOOL, LOAD_MEMORY_TOOL, AgentSpec, Compiler, Services
from mnemoray.compiler.tools import DEFAULT_MEMORY_LIMIT, MAX_MEMORY_LIMIT
from mnemoray.errors import InvalidInput
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService


def no_memories(app_name: str, user_id: str, query: str, top_k: int) -> list:
    return []


def services() -> Services:
    artifacts = InMemoryArtifactStore()
    artifacts.save("app", "u1", "s1", "report.csv", "a,b\n1,2\n", summary="numbers")
    return Services(memory_search=no_memories, artifacts=artifacts)


def compile_for(make_session, **agent):
    return Compiler.default().compile(
        make_session(), AgentSpec(name="analyst", **agent), new_message="hi", services=services()
    )


def step(req, name: str):
    return next(s for s in req.trace if s.name == name)


NOT_OPTED_IN = "the agent did not opt in through memory_tools"


@pytest.mark.parametrize("memory_tools", [{}, {"memory_tools": []}, {"memory_tools": None}])
def test_by_default_no_tool_of_the_compilers_is_offered_and_the_trace_says_why(
    make_session, memory_tools
):
    own = {"name": "book", "parameters": {}}
    req = compile_for(make_session, tools=[own], **memory_tools)
    assert req.tools == [own]
    # No artifact listing either: the agent could not load what it lists.
    assert "report.csv" not in req.system_instruction
    assert step(req, "memory_preload").detail["tools_not_offered"] == {"load_memory": NOT_OPTED_IN}
    assert step(req, "artifacts").detail["tools_not_offered"] == {"load_artifacts": NOT_OPTED_IN}


def test_an_agent_that_opts_into_both_gets_both_and_the_trace_says_why(make_session):
    req = compile_for(make_session, memory_tools=["load_memory", "load_artifacts"])
    assert [t["name"] for t in req.tools] == ["load_memory", "load_artifacts"]
    assert "report.csv" in req.system_instruction
    assert step(req, "memory_preload").detail["tools_offered"] == {
        "load_memory": "a memory service is configured"
    }
    assert step(req, "artifacts").detail["tools_offered"] == {
        "load_artifacts": "the session has artifacts"
    }


def test_a_tool_opted_into_without_its_service_is_not_offered_and_the_trace_says_why(
    make_session,
):
    agent = AgentSpec(name="a", memory_tools=["load_memory", "load_artifacts"])
    bare = Compiler.default().compile(make_session(), agent, new_message="hi")
    assert bare.tools == []
    assert step(bare, "memory_preload").detail["tools_not_offered"] == {
        "load_memory": "no memory service is configured"
    }
    assert step(bare, "artifacts").detail["tools_not_offered"] == {
        "load_artifacts": "no artifact store is configured"
    }
    empty = Compiler.default().compile(
        make_session(), agent, "hi", Services(artifacts=InMemoryArtifactStore())
    )
    assert step(empty, "artifacts").detail["tools_not_offered"] == {
        "load_artifacts": "the session has no artifacts"
    }
    # An agent that did not opt in is told nothing about services it could not use.
    plain = Compiler.default().compile(make_session(), AgentSpec(name="a"), new_message="hi")
    assert all("tools_not_offered" not in s.detail for s in plain.trace)


def test_an_agent_may_take_one_tool_and_leave_the_other(make_session):
    memory_only = compile_for(make_session, memory_tools=["load_memory"])
    assert memory_only.tools == [LOAD_MEMORY_TOOL]
    assert "report.csv" not in memory_only.system_instruction
    artifacts_only = compile_for(make_session, memory_tools=["load_artifacts"])
    assert artifacts_only.tools == [LOAD_ARTIFACTS_TOOL]
    assert "report.csv" in artifacts_only.system_instruction


def test_preload_still_works_without_the_load_memory_tool(make_session):
    calls = []

    def search(app_name, user_id, query, top_k):
        calls.append(query)
        return []

    req = Compiler.default().compile(
        make_session(),
        AgentSpec(name="a", memory_preload=True, memory_tools=[]),
        new_message="tulips",
        services=Services(memory_search=search),
    )
    assert calls == ["tulips"] and req.tools == []


@pytest.mark.parametrize(
    "value, field", [(["recall"], "memory_tools[0]"), ("load_memory", "memory_tools")]
)
def test_an_unknown_tool_name_is_refused_naming_it(value, field):
    with pytest.raises(InvalidInput) as err:
        AgentSpec(name="a", memory_tools=value)
    assert err.value.field == field


def test_load_memory_declares_a_bounded_limit():
    limit = LOAD_MEMORY_TOOL["parameters"]["properties"]["limit"]
    assert limit["type"] == "integer"
    assert (limit["minimum"], limit["maximum"]) == (1, MAX_MEMORY_LIMIT)
    assert LOAD_MEMORY_TOOL["parameters"]["required"] == ["query"]


def test_load_memory_honours_the_models_limit(tmp_path: Path):
    service = MemoryService.open(tmp_path / "store", embedder=None)
    service.add_memories(
        [
            Memory(
                "app",
                "ana",
                f"s{i}",
                "fact",
                f"ana grows tulips number {i}",
                created_at=float(i + 1),
            )
            for i in range(8)
        ]
    )
    assert len(service.load_memory("app", "ana", "tulips")) == DEFAULT_MEMORY_LIMIT
    assert len(service.load_memory("app", "ana", "tulips", limit=2)) == 2
    assert len(service.load_memory("app", "ana", "tulips", limit=8)) == 8
    assert len(service.load_memory("app", "ana", "tulips", top_k=3)) == 3  # the app default
    # A token budget: the best memories whose text fits (each is 5 tokens here).
    fitted = service.load_memory("app", "ana", "tulips", limit=8, budget_tokens=12)
    assert isinstance(fitted, list) and len(fitted) == 2
    bad = service.load_memory("app", "ana", "tulips", budget_tokens=0)
    assert isinstance(bad, dict) and bad["field"] == "budget_tokens"
    assert LOAD_MEMORY_TOOL["parameters"]["properties"]["budget_tokens"]["minimum"] == 1


@pytest.mark.parametrize("limit", [0, -1, MAX_MEMORY_LIMIT + 1, "3", 2.5, True])
def test_a_bad_limit_is_an_error_result_naming_limit(tmp_path: Path, limit):
    service = MemoryService.open(tmp_path / "store", embedder=None)
    out = service.load_memory("app", "ana", "tulips", limit=limit)
    assert isinstance(out, dict) and out["field"] == "limit"
    assert out["error"].startswith(f"limit: must be an integer from 1 to {MAX_MEMORY_LIMIT}")


def test_http_compile_takes_memory_tools_and_checks_them(make_http):
    client, backend = make_http()
    backend.sessions.create_session("app", "u1", "s1")
    body = {
        "app_name": "app",
        "user_id": "u1",
        "session_id": "s1",
        "new_message": "hi",
        "agent": {"name": "a", "tools": [{"name": "book"}]},
    }
    # The default and an older payload's null alike: none of the compiler's tools.
    for agent in (body["agent"], {**body["agent"], "memory_tools": None}):
        default = client.post("/v1/context:compile", json={**body, "agent": agent})
        assert default.status_code == 200, default.text
        out = default.json()
        assert [t["name"] for t in out["tools"]] == ["book"]
        trace = next(s for s in out["trace"] if s["name"] == "memory_preload")
        assert trace["detail"]["tools_not_offered"] == {"load_memory": NOT_OPTED_IN}
    opted_in = client.post(
        "/v1/context:compile",
        json={**body, "agent": {**body["agent"], "memory_tools": ["load_memory"]}},
    )
    assert opted_in.status_code == 200, opted_in.text
    assert [t["name"] for t in opted_in.json()["tools"]] == ["book", "load_memory"]
    bad = client.post(
        "/v1/context:compile", json={**body, "agent": {**body["agent"], "memory_tools": ["recall"]}}
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["field"].startswith("agent.memory_tools")
