"""Payload offloading: a tool result over the threshold (10 KB by default) is
stored as an artifact when appended, durable before the event; the history keeps a
handle and a short summary; load_artifacts expands it for one call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mnemoray.artifacts.files import FileArtifactStore
from mnemoray.artifacts.offload import (
    DEFAULT_THRESHOLD_BYTES,
    OFFLOADED_KEY,
    OffloadPolicy,
    append_events,
    artifact_name,
    discard,
    offload_events,
)
from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.sessions.events import Event, tool_call, tool_result, user_message
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.sessions.types import SessionEndedError, StaleSessionError
from mnemoray.settings.serve import parse_settings
from mnemoray.tokens import count_tokens

BIG = {"rows": [{"id": i, "city": "Lisbon", "note": "x" * 40} for i in range(4000)]}
BIG_BYTES = len(json.dumps(BIG, sort_keys=True, ensure_ascii=False).encode())
AGENT = AgentSpec(
    name="bot", static_instruction="You answer from data.", memory_tools=["load_artifacts"]
)


def search_turn(response: Any, call_id: str = "c1") -> list[Event]:
    return [
        user_message("find the rows"),
        tool_call("bot", "search_rows", {"q": "Lisbon"}, call_id=call_id),
        tool_result("bot", "search_rows", response, call_id=call_id),
    ]


def test_a_large_tool_result_becomes_a_handle_and_summary(tmp_path: Path) -> None:
    assert BIG_BYTES > 200_000
    sessions, artifacts = InMemorySessionStore(), FileArtifactStore(tmp_path / "art")
    session = sessions.create_session("app", "ana", "s1")
    stored = append_events(sessions, artifacts, session, search_turn(BIG))
    result = session.events[-1]
    response = result.data["response"]
    assert response[OFFLOADED_KEY] is True and response["bytes"] == BIG_BYTES
    name = response["artifact"]
    assert name.startswith("search_rows-result-") and result.artifact_delta == {name: 0}
    assert response["handle"] == artifacts.load("app", "ana", "s1", name).handle
    assert "search_rows" in response["summary"] and "rows" in response["summary"]
    assert len(response["summary"]) <= 200
    # The artifact holds the payload byte for byte, with its mime type and summary.
    art = artifacts.load("app", "ana", "s1", name)
    assert json.loads(art.text()) == BIG and art.mime_type == "application/json"
    assert art.summary == response["summary"]
    # The call and the user message are stored as given; the ids are the caller's.
    assert [e.id for e in stored] == [e.id for e in session.events]
    assert session.events[1].data["args"] == {"q": "Lisbon"}
    # A fresh copy from the store reads the same.
    again = sessions.get_session("app", "ana", "s1")
    assert again.events[-1].data["response"] == response


def test_small_results_and_other_events_stay_inline() -> None:
    sessions, artifacts = InMemorySessionStore(), InMemoryArtifactStore()
    session = sessions.create_session("app", "ana", "s1")
    small = {"rows": [1, 2, 3]}
    append_events(sessions, artifacts, session, search_turn(small))
    assert session.events[-1].data["response"] == small
    assert artifacts.list_names("app", "ana", "s1") == []


def test_threshold_is_exclusive_configurable_and_zero_is_off() -> None:
    text = "y" * 500  # a string result is measured as its UTF-8 text
    artifacts = InMemoryArtifactStore()
    sessions = InMemorySessionStore()
    session = sessions.create_session("app", "ana", "s1")
    events = search_turn(text)
    assert offload_events(artifacts, session, events, OffloadPolicy(500)).saved == []
    out = offload_events(artifacts, session, events, OffloadPolicy(499))
    assert len(out.saved) == 1 and out.events[-1].data["response"]["mime_type"].startswith(
        "text/plain"
    )
    assert artifacts.load("app", "ana", "s1", out.saved[0][0]).text() == text
    assert offload_events(artifacts, session, search_turn(BIG), OffloadPolicy(0)).saved == []
    assert OffloadPolicy().threshold_bytes == DEFAULT_THRESHOLD_BYTES == 10 * 1024
    with pytest.raises(ValueError, match="threshold_bytes"):
        OffloadPolicy(-1)


def test_the_artifact_is_durable_before_the_event_is_stored() -> None:
    artifacts = InMemoryArtifactStore()
    seen_at_append: list[list[str]] = []

    class Watching(InMemorySessionStore):
        def _append_many(self, session: Any, events: list[Event]) -> None:
            # What the artifact store holds at the moment the events are written.
            seen_at_append.append(artifacts.list_names("app", "ana", "s1"))
            super()._append_many(session, events)

    sessions = Watching()
    session = sessions.create_session("app", "ana", "s1")
    append_events(sessions, artifacts, session, search_turn(BIG))
    name = session.events[-1].data["response"]["artifact"]
    assert seen_at_append == [[name]]


def test_a_refused_append_leaves_no_artifact_behind() -> None:
    sessions, artifacts = InMemorySessionStore(), InMemoryArtifactStore()
    session = sessions.create_session("app", "ana", "s1")
    sessions.end_session(session)
    with pytest.raises(SessionEndedError):
        append_events(sessions, artifacts, session, search_turn(BIG))
    assert artifacts.list_names("app", "ana", "s1") == []
    live = sessions.create_session("app", "ana", "s2")

    def refuse(events: list[Event]) -> None:
        raise ValueError("over a limit")

    with pytest.raises(ValueError, match="over a limit"):
        append_events(sessions, artifacts, live, search_turn(BIG), check=refuse)
    assert artifacts.list_names("app", "ana", "s2") == [] and live.events == []


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_retry_that_loses_the_race_keeps_the_winners_artifact(kind: str, tmp_path: Path) -> None:
    """Request A and its retry B offload the same event (v0, v1); B's append wins, A's
    fails and discards what A saved: v0 only, never the v1 B's stored event points to."""
    artifacts = InMemoryArtifactStore() if kind == "memory" else FileArtifactStore(tmp_path / "art")
    sessions = InMemorySessionStore()
    sessions.create_session("app", "ana", "s1")
    event = search_turn(BIG)[-1]
    a_copy, b_copy = (sessions.get_session("app", "ana", "s1") for _ in range(2))
    a = offload_events(artifacts, a_copy, [event])
    b = offload_events(artifacts, b_copy, [event])
    assert [v for _, v in a.saved] == [0] and [v for _, v in b.saved] == [1]
    sessions.append_events(b_copy, b.events)
    with pytest.raises(StaleSessionError):
        append_events(sessions, artifacts, a_copy, [event])  # A (fresh offload: v2) fails
    discard(artifacts, a_copy, a.saved)
    stored = sessions.get_session("app", "ana", "s1").events[-1].data["response"]
    assert json.loads(artifacts.load_handle(stored["handle"]).text()) == BIG
    assert artifacts.list_versions("app", "ana", "s1", stored["artifact"]) == [1]


def test_two_event_ids_never_share_an_artifact_name() -> None:
    """Unsafe characters become '_' and ids are cut: a hash of the full id keeps the names
    apart, so loading by name never returns another event's payload."""
    sessions, artifacts = InMemorySessionStore(), InMemoryArtifactStore()
    session = sessions.create_session("app", "ana", "s1")
    pairs = [("a" * 70, "a" * 70 + "b"), ("x/y", "x_y"), ("x y", "x.y")]
    for k, (first, second) in enumerate(pairs):
        events = [
            tool_result(
                "bot", "search_rows", {"n": i, "pad": "z" * 20_000}, call_id=f"c{k}{i}", id=event_id
            )
            for i, event_id in enumerate((first, second))
        ]
        assert artifact_name(events[0]) != artifact_name(events[1])
        append_events(sessions, artifacts, session, events)
        for i, stored in enumerate(session.events[-2:]):
            response = stored.data["response"]
            by_name = artifacts.load("app", "ana", "s1", response["artifact"])
            assert json.loads(by_name.text())["n"] == i and by_name.version == 0
            assert response["handle"] in response["note"]  # the stub points at its version
    assert all(len(n) <= 160 for n in artifacts.list_names("app", "ana", "s1"))


def test_compile_lists_the_handle_and_load_artifacts_expands_it_for_one_call() -> None:
    sessions, artifacts = InMemorySessionStore(), InMemoryArtifactStore()
    session = sessions.create_session("app", "ana", "s1")
    append_events(sessions, artifacts, session, search_turn(BIG))
    name = session.events[-1].data["response"]["artifact"]
    services = Services(artifacts=artifacts)
    compiler = Compiler.default()

    lean = compiler.compile(session, AGENT, services=services)
    assert name in lean.system_instruction  # listed with its handle and summary
    assert any(t["name"] == "load_artifacts" for t in lean.tools)
    assert lean.total_tokens < 1_000 < count_tokens(json.dumps(BIG))

    append_events(
        sessions,
        artifacts,
        session,
        [
            tool_call("bot", "load_artifacts", {"artifact_names": [name]}, call_id="c2"),
            tool_result("bot", "load_artifacts", {"status": "ok"}, call_id="c2"),
        ],
    )
    loaded = compiler.compile(session, AGENT, services=services)
    step = next(s for s in loaded.trace if s.name == "artifacts")
    assert step.detail["inlined"] == [name]
    assert '"city": "Lisbon"' in loaded.contents[-1].text
    assert loaded.total_tokens > count_tokens(json.dumps(BIG)) // 2

    # The next step no longer carries it.
    append_events(sessions, artifacts, session, [user_message("thanks")])
    after = compiler.compile(session, AGENT, services=services)
    assert after.total_tokens < 1_000


def test_offload_setting_defaults_to_10_kb_and_is_configurable(tmp_path: Path) -> None:
    assert parse_settings({"store": str(tmp_path)}).server.offload_bytes == 10 * 1024
    s = parse_settings({"store": str(tmp_path), "server": {"offload_bytes": 0}})
    assert s.server.offload_bytes == 0


# -- over HTTP, without Ray -----------------------------------------------------------------
def _append(client: Any, events: list[Event]) -> Any:
    body = {
        "app_name": "app",
        "user_id": "ana",
        "events": [{k: v for k, v in e.to_dict().items() if k != "session_id"} for e in events],
    }
    return client.post("/v1/sessions/s1/events", json=body)


def test_http_append_offloads_and_the_artifact_route_serves_the_payload(make_http) -> None:
    client, backend = make_http(max_body_bytes=1 << 20)
    backend.sessions.create_session("app", "ana", "s1")
    r = _append(client, search_turn(BIG))
    assert r.status_code == 200, r.text
    got = client.get("/v1/sessions/s1", params={"app_name": "app", "user_id": "ana"}).json()
    response = got["events"][-1]["data"]["response"]
    assert response[OFFLOADED_KEY] is True and response["bytes"] == BIG_BYTES
    assert len(json.dumps(got)) < 5_000
    raw = client.get(f"/v1/artifacts/app/ana/s1/{response['artifact']}")
    assert raw.status_code == 200 and json.loads(raw.content) == BIG
    out = client.post(
        "/v1/context:compile",
        json={
            "app_name": "app",
            "user_id": "ana",
            "session_id": "s1",
            "agent": {"name": "bot", "memory_tools": ["load_artifacts"]},
        },
    ).json()
    assert out["total_tokens"] < 1_000 and response["artifact"] in out["system_instruction"]


def test_http_offload_threshold_comes_from_the_http_config(make_http) -> None:
    client, backend = make_http(max_body_bytes=1 << 20, offload_bytes=0)
    backend.sessions.create_session("app", "ana", "s1")
    assert _append(client, search_turn(BIG)).status_code == 200
    assert backend.sessions.get_session("app", "ana", "s1").events[-1].data["response"] == BIG
    assert backend.artifacts.list_names("app", "ana", "s1") == []
