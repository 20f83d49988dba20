"""Agents as tools: a callee compile sees only a focused prompt and the
artifacts it is given: none of the caller's history, memories, state or other
artifacts; in-process and over POST /v1/context:compile."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.client import MnemorayClient
from mnemoray.compiler import AgentSpec, Callee, Compiler, MemorySnippet, Services
from mnemoray.errors import InvalidInput, NotFound
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message

CALLER_HISTORY = [
    user_message("My budget is 3000 euros, plan a trip to Lisbon."),
    model_message("planner", "Let me check flights."),
    tool_call("planner", "flights", {"to": "LIS"}, call_id="f1"),
    tool_result("planner", "flights", {"cheapest": 212}, call_id="f1"),
]
CALLEE = AgentSpec(
    name="summarizer",
    static_instruction="You summarize documents.",
    instruction="Write for {temp:audience?}.",
    memory_preload=True,
)


def never_search(*args: Any) -> list[MemorySnippet]:
    raise AssertionError("a callee must not recall memories")


def setup(make_session: Any) -> tuple[Any, InMemoryArtifactStore]:
    session = make_session(*CALLER_HISTORY, state={"user:name": "Ana", "budget": 3000})
    store = InMemoryArtifactStore()
    store.save(
        "app", "u1", "s1", "hotels.csv", "name,price\nAlfama Inn,95\n", "text/csv", "hotel list"
    )
    store.save("app", "u1", "s1", "secret-notes", "do not show the callee")
    store.save("app", "u1", "s1", "user:passport", "P1234567")
    return session, store


def test_callee_sees_only_its_prompt_and_given_artifacts(make_session):
    session, store = setup(make_session)
    req = Compiler.default().compile_callee(
        session,
        CALLEE,
        "Summarize the hotel options.",
        ["hotels.csv"],
        Services(memory_search=never_search, artifacts=store),
        temp_state={"temp:audience": "a traveller"},
    )
    texts = [c.text for c in req.contents]
    assert len(texts) == 2 and texts[-1] == "Summarize the hotel options."
    assert texts[0].startswith("[Artifact hotels.csv (artifact://app/u1/s1/hotels.csv@0")
    assert "Alfama Inn,95" in texts[0]
    everything = req.system_instruction + "\n".join(texts) + str(req.tools)
    for hidden in ("Lisbon", "flights", "secret-notes", "passport", "3000", "<memory>"):
        assert hidden not in everything
    assert "Write for a traveller." in req.system_instruction
    assert [t["name"] for t in req.tools] == []  # no load_memory, no load_artifacts
    steps = {s.name: s for s in req.trace}
    assert steps["history"].detail["mode"] == "callee"
    assert steps["history"].detail["caller_events_hidden"] == len(CALLER_HISTORY)
    assert steps["artifacts"].detail == {"mode": "callee", "given": ["hotels.csv"]}
    assert "skipped" in steps["memory_preload"].detail
    assert req.total_tokens == sum(s.tokens_added for s in req.trace)
    # The caller's own compile of the same session still sees everything.
    caller = Compiler.default().compile(
        session, AgentSpec(name="planner"), "go on", Services(artifacts=store)
    )
    assert any("Lisbon" in c.text for c in caller.contents)


def test_callee_state_is_only_what_it_is_handed(make_session):
    session, store = setup(make_session)
    needs_name = AgentSpec(name="greeter", instruction="Greet {user:name}.")
    with pytest.raises(InvalidInput, match="user:name"):
        Compiler.default().compile_callee(session, needs_name, "hello")
    req = Compiler.default().compile_callee(
        session, needs_name, "hello", temp_state={"user:name": "Ana"}
    )
    assert "Greet Ana." in req.system_instruction


def test_callee_templates_read_only_given_artifacts(make_session):
    session, store = setup(make_session)
    peeking = AgentSpec(
        name="peek", instruction="Notes: {artifact.secret-notes?}|{artifact.hotels.csv?}"
    )
    req = Compiler.default().compile_callee(
        session, peeking, "x", ["hotels.csv"], Services(artifacts=store)
    )
    assert "do not show" not in req.system_instruction
    assert "Notes: |name,price" in req.system_instruction


def test_callee_artifacts_by_handle_and_user_scope(make_session):
    session, store = setup(make_session)
    handle = store.load("app", "u1", "s1", "hotels.csv").handle
    req = Compiler.default().compile_callee(
        session, CALLEE, "check", [handle, "user:passport"], Services(artifacts=store)
    )
    assert "Alfama Inn" in req.contents[0].parts[0].text
    assert "P1234567" in req.contents[0].parts[1].text


def test_callee_errors_name_the_given_artifact(make_session):
    session, store = setup(make_session)
    compiler = Compiler.default()
    with pytest.raises(NotFound) as missing:
        compiler.compile_callee(
            session, CALLEE, "x", ["hotels.csv", "nope"], Services(artifacts=store)
        )
    assert missing.value.field == "callee.artifacts[1]"
    other = "artifact://app/someone-else/s9/hotels.csv@0"
    with pytest.raises(InvalidInput) as foreign:
        compiler.compile_callee(session, CALLEE, "x", [other], Services(artifacts=store))
    assert foreign.value.field == "callee.artifacts[0]"
    with pytest.raises(InvalidInput) as both:
        compiler.compile(session, CALLEE, "hi", callee=Callee("x"))
    assert both.value.field == "new_message"
    with pytest.raises(InvalidInput, match="prompt"):
        Callee("  ")


# -- over HTTP, without Ray -----------------------------------------------------------------
def test_http_callee_compile(make_http):
    client, backend = make_http()
    session = backend.sessions.create_session("app", "ana", "trip", state={"budget": 3000})
    backend.sessions.append_events(session, [user_message("Plan Lisbon for me.")])
    backend.artifacts.save("app", "ana", "trip", "hotels.csv", "Alfama Inn,95", "text/csv")
    base = {
        "app_name": "app",
        "user_id": "ana",
        "session_id": "trip",
        "agent": {"name": "summarizer", "memory_preload": True},
    }
    r = client.post(
        "/v1/context:compile",
        json={**base, "callee": {"prompt": "Summarize the hotels.", "artifacts": ["hotels.csv"]}},
    )
    assert r.status_code == 200, r.text
    out = r.json()
    texts = [p["text"] for c in out["contents"] for p in c["parts"]]
    assert texts[-1] == "Summarize the hotels." and "Alfama Inn,95" in texts[0]
    assert "Lisbon" not in r.text and "<memory>" not in out["system_instruction"]
    missing = client.post(
        "/v1/context:compile", json={**base, "callee": {"prompt": "x", "artifacts": ["nope"]}}
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["field"] == "callee.artifacts[0]"
    both = client.post(
        "/v1/context:compile", json={**base, "new_message": "hi", "callee": {"prompt": "x"}}
    )
    assert both.status_code == 422 and both.json()["error"]["field"] == "new_message"
    empty = client.post("/v1/context:compile", json={**base, "callee": {"prompt": ""}})
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "callee.prompt"
    typo = client.post(
        "/v1/context:compile", json={**base, "callee": {"prompt": "x", "artifact": ["hotels.csv"]}}
    )
    assert typo.status_code == 422 and typo.json()["error"]["field"] == "callee.artifact"


def test_the_python_client_sends_a_callee(make_http):
    client, backend = make_http()
    backend.sessions.create_session("app", "ana", "trip")
    backend.artifacts.save("app", "ana", "trip", "notes.txt", "pack light")

    def transport(request: httpx.Request) -> httpx.Response:
        r = client.request(
            request.method,
            request.url.path,
            params=request.url.params,
            content=request.content,
            headers=dict(request.headers),
        )
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    with MnemorayClient("http://test", transport=httpx.MockTransport(transport)) as mr:
        out = mr.compile(
            "app",
            "ana",
            "trip",
            AgentSpec(name="packer"),
            callee=Callee("What should I pack?", ("notes.txt",)),
        )
    texts = [p.text for c in out.contents for p in c.parts]
    assert texts[-1] == "What should I pack?" and "pack light" in texts[0]
