"""Tool results older than N invocations leave the compiled history (per agent): the
call stays, the result becomes a one-line summary with its call id; the session keeps
everything."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mnemoray.artifacts.offload import append_events
from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.compiler.processors.tool_results import invocation_index
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.store import InMemorySessionStore

PAYLOAD = {"rows": [f"row {i}: " + "data " * 20 for i in range(40)]}


def turn(n: int, author: str = "bot") -> list[Event]:
    return [
        user_message(f"question {n}", id=f"u{n}"),
        tool_call(author, "lookup", {"n": n}, call_id=f"c{n}", id=f"call{n}"),
        tool_result(author, "lookup", {**PAYLOAD, "n": n}, call_id=f"c{n}", id=f"res{n}"),
        model_message(author, f"answer {n}", id=f"m{n}"),
    ]


def responses(req: Any) -> dict[str, Any]:
    """call id -> the function response the model sees."""
    return {
        p.function_response.id: p.function_response.response
        for c in req.contents
        for p in c.parts
        if p.function_response is not None
    }


def test_results_older_than_the_window_become_summaries(make_session):
    session = make_session(*turn(1), *turn(2), *turn(3))
    compiler = Compiler.default()
    full = compiler.compile(session, AgentSpec(name="bot"))
    windowed = compiler.compile(session, AgentSpec(name="bot", tool_result_window=1))
    shown = responses(windowed)
    assert shown["c3"] == {**PAYLOAD, "n": 3}  # the current invocation: in full
    for call in ("c1", "c2"):
        assert set(shown[call]) == {"summary", "note"}
        assert shown[call]["summary"].startswith(f"{len(json.dumps({**PAYLOAD, 'n': 1}))}")
        assert len(shown[call]["summary"]) < 160
    # Every call is still there, still answered, in the same places.
    assert [c.event_ids for c in windowed.contents] == [c.event_ids for c in full.contents]
    calls = [
        p.function_call.id
        for c in windowed.contents
        for p in c.parts
        if p.function_call is not None
    ]
    assert calls == ["c1", "c2", "c3"]
    step = next(s for s in windowed.trace if s.name == "tool_results")
    assert step.detail == {"window": 1, "dropped_results": 2, "dropped_event_ids": ["res1", "res2"]}
    assert step.tokens_added < 0 and windowed.total_tokens < full.total_tokens
    assert windowed.total_tokens == sum(s.tokens_added for s in windowed.trace)
    assert session.events[2].data["response"] == {**PAYLOAD, "n": 1}  # session untouched


def test_a_new_message_starts_a_new_invocation(make_session):
    session = make_session(*turn(1), *turn(2))
    agent = AgentSpec(name="bot", tool_result_window=2)
    kept = responses(Compiler.default().compile(session, agent))
    assert "rows" in kept["c1"] and "rows" in kept["c2"]
    answered = responses(Compiler.default().compile(session, agent, "question 3"))
    assert "rows" not in answered["c1"] and "rows" in answered["c2"]


def test_other_agents_results_are_summarized_as_narrative(make_session):
    session = make_session(*turn(1, author="scout"), *turn(2))
    req = Compiler.default().compile(session, AgentSpec(name="bot", tool_result_window=1))
    narrative = next(c.text for c in req.contents if c.event_ids == ("res1",))
    assert narrative.startswith("For context: [scout] `lookup` tool returned result: ")
    assert "summary" in narrative and "row 3" not in narrative


def test_invocations_follow_invocation_ids_and_user_messages():
    events = [
        user_message("a", id="1"),
        tool_call("bot", "t", {}, call_id="x", id="2", invocation_id="inv-a"),
        tool_result("bot", "t", 1, call_id="x", id="3", invocation_id="inv-a"),
        tool_call("bot", "t", {}, call_id="y", id="4", invocation_id="inv-b"),
        user_message("b", id="5"),
    ]
    assert invocation_index(events) == {"1": 1, "2": 1, "3": 1, "4": 2, "5": 3}


def test_an_offloaded_result_summary_names_its_artifact():
    sessions, artifacts = InMemorySessionStore(), InMemoryArtifactStore()
    session = sessions.create_session("app", "u1", "s1")
    big = {"text": "lorem ipsum " * 2000}
    append_events(
        sessions,
        artifacts,
        session,
        [
            user_message("read it"),
            tool_call("bot", "fetch", {}, call_id="f"),
            tool_result("bot", "fetch", big, call_id="f"),
            user_message("next"),
        ],
    )
    name = session.events[2].data["response"]["artifact"]
    req = Compiler.default().compile(
        session, AgentSpec(name="bot", tool_result_window=1), services=Services(artifacts=artifacts)
    )
    shown = responses(req)["f"]
    assert shown["artifact"] == name and "load_artifacts" in shown["note"]


def test_window_validation():
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="tool_result_window"):
            AgentSpec(name="x", tool_result_window=bad)  # type: ignore[arg-type]


def test_http_tool_result_window(make_http):
    client, backend = make_http()
    session = backend.sessions.create_session("app", "ana", "s1")
    backend.sessions.append_events(session, [*turn(1), *turn(2)])
    body = {
        "app_name": "app",
        "user_id": "ana",
        "session_id": "s1",
        "agent": {"name": "bot", "tool_result_window": 1},
    }
    out = client.post("/v1/context:compile", json=body).json()
    parts = [p for c in out["contents"] for p in c["parts"] if "function_response" in p]
    assert "summary" in parts[0]["function_response"]["response"]
    assert "rows" in parts[1]["function_response"]["response"]
    bad = client.post(
        "/v1/context:compile", json={**body, "agent": {"name": "bot", "tool_result_window": 0}}
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "agent.tool_result_window"
