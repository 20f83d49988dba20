"""Deleting a session and forgetting everything about a user, over the real HTTP app
without Ray (``build_api(LocalBackend)``): sessions, artifacts, jobs and memories go,
another user of the same app keeps everything, a second erasure answers zeros."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli_app
from mnemoray.client import MnemorayClient
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.http.local_backend import LocalBackend
from mnemoray.memory.hygiene.erasure import ERASED

KEY = "erasure-test-key-0123456789"
OTHER_KEY = "erasure-other-key-0123456789"  # another app only
AUTH = {"Authorization": f"Bearer {KEY}"}
ANA = {"app_name": "app", "user_id": "ana"}
BOB = {"app_name": "app", "user_id": "bob"}
MODELS = {"embedder": "none", "summarizer": "extractive"}


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    b = LocalBackend.open(str(tmp_path / "store"), models=MODELS)
    yield b
    b.close()


@pytest.fixture
def http(backend: LocalBackend) -> TestClient:
    keys = ApiKeys.from_mapping({KEY: "app", OTHER_KEY: "other"})
    return TestClient(build_api(backend, HttpConfig(keys=keys)), headers=AUTH)


def message(text: str) -> dict[str, Any]:
    return {"author": "user", "role": "user", "type": "message", "text": text}


def session_with_memories(http: TestClient, who: dict[str, str], sid: str, fact: str) -> None:
    """A session with events and artifacts (its own and the user's), ended so its
    memories are in the store."""
    r = http.post("/v1/sessions", json={**who, "session_id": sid})
    assert r.status_code == 201, r.text
    r = http.post(f"/v1/sessions/{sid}/events", json={**who, "events": [message(fact)]})
    assert r.status_code == 200, r.text
    base = f"/v1/artifacts/{who['app_name']}/{who['user_id']}/{sid}"
    for name in ("notes.txt", "user:profile.txt"):
        r = http.put(f"{base}/{name}", content=f"{fact} ({name})", headers=AUTH)
        assert r.status_code == 201, r.text
    r = http.post(f"/v1/sessions/{sid}:end", params={"wait": "true"}, json=who)
    assert r.status_code == 200 and r.json()["ingestion"]["status"] == "ingested", r.text


def live_texts(http: TestClient, who: dict[str, str]) -> list[str]:
    r = http.get("/v1/memories", params=who)
    assert r.status_code == 200, r.text
    return [m["text"] for m in r.json()["memories"]]


def recalled(http: TestClient, who: dict[str, str], query: str) -> list[str]:
    r = http.post("/v1/recall", json={**who, "query": query})
    assert r.status_code == 200, r.text
    return [m["text"] for m in r.json()["memories"]]


def artifact(http: TestClient, who: dict[str, str], sid: str, name: str) -> int:
    return http.get(f"/v1/artifacts/{who['app_name']}/{who['user_id']}/{sid}/{name}").status_code


def test_delete_session_removes_it_its_artifacts_jobs_and_memories(
    http: TestClient, backend: LocalBackend
) -> None:
    session_with_memories(http, ANA, "s1", "My parrot Kiwi loves sunflower seeds.")
    session_with_memories(http, ANA, "s2", "I moved to Lisbon last spring.")
    r = http.get("/v1/memories", params=ANA)
    of_s1 = [m for m in r.json()["memories"] if m["session_id"] == "s1"]
    assert of_s1 and any("Kiwi" in m["text"] for m in of_s1)
    # A job still queued for s1 (the worker held): the delete cancels it.
    ingestion = backend.parts.ingestion
    assert ingestion is not None
    ingestion.worker.stop(timeout=5)
    job = ingestion.queue.enqueue("app", "ana", "s1", kind="session_end")

    # Another user's key, or another user of the app: the session is not theirs.
    other = http.delete(
        "/v1/sessions/s1", params=ANA, headers={"Authorization": f"Bearer {OTHER_KEY}"}
    )
    assert other.status_code == 403, other.text
    assert http.delete("/v1/sessions/s1", params=BOB).status_code == 404
    assert http.get("/v1/sessions/s1", params=ANA).status_code == 200

    r = http.delete("/v1/sessions/s1", params=ANA)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["session_id"] == "s1"
    assert out["removed"] == {"events": 1, "artifacts": 1, "jobs": 1, "memories": len(of_s1)}
    assert http.get("/v1/sessions/s1", params=ANA).status_code == 404
    assert artifact(http, ANA, "s1", "notes.txt") == 404
    # The user's own artifact stays: every session of the user sees it.
    assert artifact(http, ANA, "s2", "user:profile.txt") == 200
    got = http.get(f"/v1/jobs/{job.job_id}", params=ANA).json()
    assert (got["status"], got["error"]) == ("failed", "forgotten")
    texts = live_texts(http, ANA)
    assert not any("Kiwi" in t for t in texts) and any("Lisbon" in t for t in texts)
    assert http.get("/v1/sessions/s2", params=ANA).status_code == 200
    # Gone: a second delete is a 404.
    assert http.delete("/v1/sessions/s1", params=ANA).status_code == 404


def test_forget_everything_erases_the_user_and_only_the_user(
    http: TestClient, backend: LocalBackend
) -> None:
    session_with_memories(http, ANA, "s1", "My parrot Kiwi loves sunflower seeds.")
    session_with_memories(http, ANA, "s2", "I moved to Lisbon last spring.")
    session_with_memories(http, BOB, "s1", "My parrot Kiwi is afraid of the vacuum.")
    assert recalled(http, ANA, "Kiwi parrot")
    anas = len(live_texts(http, ANA))
    before = http.get("/v1/graph/app/ana", params={"entity": "Kiwi"})
    assert before.status_code == 200 and before.json()["neighbours"], before.text
    ingestion = backend.parts.ingestion
    assert ingestion is not None
    ingestion.worker.stop(timeout=5)
    ingestion.queue.enqueue("app", "ana", "s2", kind="session_end")
    bobs_job = ingestion.queue.enqueue("app", "bob", "s1", kind="session_end")

    other = http.delete("/v1/users/app/ana", headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert other.status_code == 403, other.text

    r = http.delete("/v1/users/app/ana", params={"reason": "user asked"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["app_name"], out["user_id"]) == ("app", "ana") and out["erased_at"] > 0
    assert out["removed"] == {
        "jobs": 1,
        "sessions": 2,
        "events": 2,
        "artifacts": 3,  # notes.txt of s1 and s2, and user:profile.txt
        "memories": anas,
    }
    assert "bob" not in r.text
    # Everything of Ana's is gone ...
    assert live_texts(http, ANA) == [] and recalled(http, ANA, "Kiwi parrot") == []
    for sid in ("s1", "s2"):
        assert http.get(f"/v1/sessions/{sid}", params=ANA).status_code == 404
        assert artifact(http, ANA, sid, "notes.txt") == 404
        assert artifact(http, ANA, sid, "user:profile.txt") == 404
    assert http.get("/v1/sessions", params=ANA).json()["sessions"] == []
    graph = http.get("/v1/graph/app/ana", params={"entity": "Kiwi"})
    assert graph.status_code == 404 and "no entity graph" in graph.text, graph.text
    # ... and recorded, without what was erased.
    records = http.get("/v1/memories/forgotten", params=ANA).json()["records"]
    assert [(r["scope"], r["reason"]) for r in records][-1] == ("user", f"{ERASED}: user asked")
    assert "Kiwi" not in str(records)
    # Bob, of the same app, keeps everything.
    assert any("vacuum" in t for t in live_texts(http, BOB))
    assert http.get("/v1/sessions/s1", params=BOB).status_code == 200
    assert artifact(http, BOB, "s1", "notes.txt") == 200
    assert artifact(http, BOB, "s1", "user:profile.txt") == 200
    assert http.get(f"/v1/jobs/{bobs_job.job_id}", params=BOB).json()["status"] == "queued"
    # Bob's graph is his own and stays.
    bobs_graph = http.get("/v1/graph/app/bob", params={"entity": "Kiwi"})
    assert bobs_graph.status_code == 200 and bobs_graph.json()["neighbours"], bobs_graph.text
    # Again: nothing is left, zeros.
    again = http.delete("/v1/users/app/ana")
    assert again.status_code == 200, again.text
    assert set(again.json()["removed"].values()) == {0}
    # The memories-only route is unchanged.
    bobs = len(live_texts(http, BOB))
    assert http.delete("/v1/users/app/bob/memories").json() == {"forgotten": bobs}
    assert http.get("/v1/sessions/s1", params=BOB).status_code == 200


def test_the_client_deletes_a_session_and_forgets_a_user(
    http: TestClient, backend: LocalBackend
) -> None:
    session_with_memories(http, ANA, "s1", "My parrot Kiwi loves sunflower seeds.")
    session_with_memories(http, ANA, "s2", "I moved to Lisbon last spring.")
    client = MnemorayClient(api_key=KEY, http=http)
    out = client.delete_session("app", "ana", "s1")
    assert (out.removed.events, out.removed.artifacts) == (1, 1) and out.removed.memories
    left = len(live_texts(http, ANA))
    erased = client.forget_everything("app", "ana")
    assert (erased.removed.sessions, erased.removed.memories) == (1, left)
    assert erased.removed.artifacts == 2  # s2's notes.txt and user:profile.txt
    assert client.forget_everything("app", "ana").removed.sessions == 0
    assert client.list_sessions("app", "ana") == []


def test_the_cli_forgets_everything_about_a_user_in_a_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = LocalBackend.open(str(store), models=MODELS)
    try:
        http = TestClient(
            build_api(backend, HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"}))), headers=AUTH
        )
        session_with_memories(http, ANA, "s1", "My parrot Kiwi loves sunflower seeds.")
        session_with_memories(http, BOB, "s1", "My parrot Kiwi is afraid of the vacuum.")
        anas = len(live_texts(http, ANA))
    finally:
        backend.close()
    runner = CliRunner()
    args = ["memory", "forget-user", "--store", str(store), "--app", "app", "--user", "ana"]
    r = runner.invoke(cli_app, [*args, "--reason", "user asked", "--json"])
    assert r.exit_code == 0, r.output
    removed = json.loads(r.output)["removed"]
    assert removed == {"jobs": 0, "sessions": 1, "events": 1, "artifacts": 2, "memories": anas}
    again = runner.invoke(cli_app, [*args, "--json"])
    assert again.exit_code == 0 and set(json.loads(again.output)["removed"].values()) == {0}
    backend = LocalBackend.open(str(store), models=MODELS)
    try:
        http = TestClient(
            build_api(backend), client=("127.0.0.1", 50000), base_url="http://127.0.0.1:8765"
        )
        assert live_texts(http, ANA) == [] and live_texts(http, BOB)
        assert http.get("/v1/sessions/s1", params=ANA).status_code == 404
        assert http.get("/v1/sessions/s1", params=BOB).status_code == 200
        assert artifact(http, ANA, "s1", "user:profile.txt") == 404
        assert artifact(http, BOB, "s1", "user:profile.txt") == 200
    finally:
        backend.close()
