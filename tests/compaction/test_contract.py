"""The compaction contract, over HTTP only: a session created with its own
``compaction`` policy is compacted by the server itself after appends (no client
call), and a compile then stays under the threshold.

Without Ray: the routes over the ServiceBackend (a real MemoryService, compiler and
AutoCompactor, wired as the ingress wires them). With Ray (``ray`` marker): the
same contract against the real Serve app of ``test_app``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.events import Event
from mnemoray.settings.compaction import CompactionSettings
from mnemoray.tokens import count_tokens
from tests.support.service_backend import ServiceBackend

KEY = "compaction-contract-key-0123456789"
THRESHOLD = 2000
AGENT = {"name": "helper", "static_instruction": "You are a helpful assistant."}
NEW_MESSAGE = "What did we settle about the balcony plants?"
TOPICS = ("tomatoes", "basil", "the balcony", "watering", "seedlings", "compost")


def message(n: int) -> dict[str, Any]:
    role = "user" if n % 2 == 0 else "model"
    return {
        "author": "user" if role == "user" else "helper",
        "role": role,
        "type": "message",
        "invocation_id": f"inv-{n // 2}",
        "text": f"Note {n}: about {TOPICS[n % len(TOPICS)]}, keep it short.",
    }


def poll(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """``check()`` once it is truthy (polled until a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        out = check()
        if out or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


def run_contract(post: Callable[..., Any], get: Callable[..., Any], app: str) -> None:
    """The contract, through any HTTP client (TestClient or httpx)."""
    who = {"app_name": app, "user_id": "ana"}
    created = post(
        "/v1/sessions", json={**who, "compaction": {"token_threshold": THRESHOLD, "keep_last": 5}}
    )
    assert created.status_code == 201, created.text
    sid = created.json()["session_id"]
    for start in range(0, 300, 50):
        started = time.perf_counter()
        r = post(
            f"/v1/sessions/{sid}/events",
            json={**who, "events": [message(n) for n in range(start, start + 50)]},
        )
        assert r.status_code == 200, r.text
        assert time.perf_counter() - started < 5  # the append never waits for a summary

    def compile_() -> dict[str, Any]:
        r = post(
            "/v1/context:compile",
            json={**who, "session_id": sid, "agent": AGENT, "new_message": NEW_MESSAGE},
        )
        assert r.status_code == 200, r.text
        return r.json()

    def settled() -> tuple[dict[str, Any], dict[str, Any]] | None:
        body = get(f"/v1/sessions/{sid}", params=who).json()
        covered = {
            i
            for e in body["events"]
            if e["type"] == "compaction"
            for i in e["data"]["source_event_ids"]
        }
        first = next(e for e in body["events"] if e["type"] == "message")
        if first["id"] not in covered:
            return None
        out = compile_()
        return (body, out) if out["total_tokens"] < THRESHOLD + count_tokens(NEW_MESSAGE) else None

    # A compile that comes first uses what is there; within seconds it is compacted.
    assert compile_()["total_tokens"] > 0
    done = poll(settled)
    assert done is not None, "not compacted under the threshold within the deadline"
    body, out = done
    raw = [e for e in body["events"] if e["type"] == "message"]
    assert len(raw) == 300  # raw events stay; compaction only adds summaries
    comps = [e for e in body["events"] if e["type"] == "compaction"]
    for c in comps:  # each names what it covers and how much it saved
        assert c["data"]["raw_tokens"] > c["data"]["summary_tokens"] > 0
    # The newest keep_last invocations (two messages each) are never covered.
    covered = {i for c in comps for i in c["data"]["source_event_ids"]}
    assert not covered & {e["id"] for e in raw[-10:]}
    # The compile's trace tells how much the summaries it shows saved.
    history = next(step for step in out["trace"] if step["name"] == "history")
    assert history["detail"]["compression_ratio"] > 1
    assert out["total_tokens"] < THRESHOLD + count_tokens(NEW_MESSAGE)
    assert out["total_tokens"] > count_tokens(NEW_MESSAGE)


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    backend = ServiceBackend(MemoryService.open(tmp_path / "store", embedder=None))
    return TestClient(
        build_api(
            backend,  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})),
        ),
        headers={"Authorization": f"Bearer {KEY}"},
    )


def test_300_appended_messages_are_compacted_by_the_server(client: TestClient) -> None:
    run_contract(client.post, client.get, "app")
    text = client.get("/metrics").text
    assert 'mnemoray_compactions_total{trigger="token_threshold"}' in text
    assert "mnemoray_compaction_compression_ratio_count" in text
    assert "mnemoray_compaction_duration_seconds_count" in text


@pytest.mark.parametrize(
    "policy,field",
    [
        ({"keep_last": -1}, "compaction.keep_last"),
        ({"token_threshold": 0}, "compaction.token_threshold"),
        ({"interval": "often"}, "compaction.interval"),
        ({"boundaries": ["topic_shift", "sunset"]}, "compaction.boundaries.1"),
        ({"keep_lats": 3}, "compaction.keep_lats"),
        ({"overlap": None}, "compaction.overlap"),
    ],
)
def test_a_bad_policy_is_a_422_naming_the_key(client: TestClient, policy: dict, field: str) -> None:
    r = client.post(
        "/v1/sessions",
        json={"app_name": "app", "user_id": "ana", "session_id": "bad", "compaction": policy},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    # Nothing was created.
    assert (
        client.get("/v1/sessions/bad", params={"app_name": "app", "user_id": "ana"}).status_code
        == 404
    )


def test_a_session_policy_is_kept_with_the_session(client: TestClient) -> None:
    who = {"app_name": "app", "user_id": "ana"}
    r = client.post(
        "/v1/sessions",
        json={
            **who,
            "session_id": "p",
            "compaction": {"interval": 2, "overlap": 0, "boundaries": ["phrase", "task_done"]},
        },
    )
    assert r.status_code == 201, r.text
    policy = [e for e in r.json()["events"] if e["type"] == "control"]
    assert [p["data"] for p in policy] == [
        {
            "action": "compaction_policy",
            "policy": {"interval": 2, "overlap": 0, "boundaries": ["phrase", "task_done"]},
        }
    ]
    plain = client.post("/v1/sessions", json={**who, "session_id": "plain"})
    assert plain.json()["events"] == [] and plain.json()["version"] == 0


def test_expected_version_ignores_background_compactions(client: TestClient) -> None:
    who = {"app_name": "app", "user_id": "ana"}
    policy = {"interval": 1, "overlap": 0, "keep_last": 1}
    client.post("/v1/sessions", json={**who, "session_id": "v", "compaction": policy})
    first = client.post(
        "/v1/sessions/v/events",
        json={**who, "events": [message(n) for n in range(4)], "expected_version": 1},
    )
    assert first.status_code == 200, first.text
    version = first.json()["version"]
    assert poll(lambda: client.get("/v1/sessions/v", params=who).json()["version"] > version)
    # The session moved on by a compaction only: the client's version still holds.
    again = client.post(
        "/v1/sessions/v/events",
        json={**who, "events": [message(4), message(5)], "expected_version": version},
    )
    assert again.status_code == 200, again.text
    stale = client.post(
        "/v1/sessions/v/events", json={**who, "events": [message(6)], "expected_version": version}
    )
    assert stale.status_code == 409 and stale.json()["error"]["field"] == "expected_version"


@pytest.mark.ray
def test_the_contract_against_the_real_serve_app(server) -> None:  # noqa: F811
    with server.client() as c:
        run_contract(c.post, c.get, "app")
        text = c.get("/metrics").text
    assert "mnemoray_compactions_total" in text


# The real Serve app of test_app (module-scoped there, started once here too).
from tests.serve.test_app import server  # noqa: E402,F401


@pytest.mark.parametrize("app_compacts", [True, False])
def test_an_appended_policy_event_is_checked_and_never_breaks_appends(
    tmp_path: Path, app_compacts: bool
) -> None:
    """A client's own ``compaction_policy`` control event is checked like a created
    session's (422 naming the key); one stored in-process that cannot be read never
    makes a later append answer 500, with the app's compaction on or off."""
    settings = CompactionSettings() if app_compacts else CompactionSettings(token_threshold=None)
    backend = ServiceBackend(MemoryService.open(tmp_path / "store", embedder=None), settings)
    client = TestClient(
        build_api(
            backend,  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})),
        ),
        headers={"Authorization": f"Bearer {KEY}"},
        raise_server_exceptions=False,
    )
    who = {"app_name": "app", "user_id": "ana"}
    assert client.post("/v1/sessions", json={**who, "session_id": "s"}).status_code == 201

    def control(policy: object) -> dict[str, Any]:
        return {
            "author": "user",
            "role": "system",
            "type": "control",
            "data": {"action": "compaction_policy", "policy": policy},
        }

    for policy, field in [
        ({"boundaries": None}, "boundaries"),
        ({"boundaries": 5}, "boundaries"),
        ({"interval": "x"}, "interval"),
        ({"nope": 1}, "nope"),
    ]:
        r = client.post(
            "/v1/sessions/s/events", json={**who, "events": [message(0), control(policy)]}
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == f"events[1].data.policy.{field}"
    r = client.post("/v1/sessions/s/events", json={**who, "events": [control([1])]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "events[0].data.policy"
    assert client.get("/v1/sessions/s", params=who).json()["version"] == 0  # none stored
    # Stored in-process, past the HTTP check: appends still answer 200.
    session = backend.sessions.get_session("app", "ana", "s")
    backend.sessions.append_event(session, Event.from_dict(control({"boundaries": None})))
    for n in range(2):
        r = client.post("/v1/sessions/s/events", json={**who, "events": [message(n)]})
        assert r.status_code == 200, r.text
    # A good one is taken, and the session is compacted by it.
    r = client.post(
        "/v1/sessions/s/events",
        json={
            **who,
            "events": [
                control({"interval": 1, "overlap": 0, "keep_last": 1}),
                message(2),
                message(3),
            ],
        },
    )
    assert r.status_code == 200, r.text
    assert poll(
        lambda: any(
            e["type"] == "compaction"
            for e in client.get("/v1/sessions/s", params=who).json()["events"]
        )
    )
    backend.compaction.wait_idle(5)
