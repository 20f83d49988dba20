"""What one request may ask of the write path, over the real HTTP app without Ray
(``build_api(LocalBackend)``): a synchronous add with more to embed than
``server.max_sync_embed_chars`` is a 413 naming the limit and the way around it, and
one key past ``ingestion.jobs``' pending bound is a 429 while other keys still queue."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mnemoray.http.app import build_api, http_config
from mnemoray.http.auth import ApiKeys
from mnemoray.http.ingestion import IngestionJobs
from mnemoray.http.local_backend import LocalBackend

KEY = "ingestion-test-key-0123456789"
OTHER_KEY = "ingestion-other-key-0123456789"  # the same app, another client
ANA = {"app_name": "app", "user_id": "ana"}
LIMIT = 200  # characters one synchronous add may embed here


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    b = LocalBackend.open(
        str(tmp_path / "store"),
        models={"embedder": "none", "summarizer": "extractive"},
        server={"max_sync_embed_chars": LIMIT},
        ingestion={"jobs": {"max_pending_per_key": 2, "max_pending_chars_per_key": 2_000}},
    )
    yield b
    b.close()


def _client(backend: LocalBackend, key: str) -> TestClient:
    keys = ApiKeys.from_mapping({KEY: "app", OTHER_KEY: "app"})
    api = build_api(backend, http_config(backend.settings.server, keys))
    return TestClient(api, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def http(backend: LocalBackend) -> TestClient:
    return _client(backend, KEY)


def _jobs(backend: LocalBackend) -> IngestionJobs:
    assert backend.parts.ingestion is not None
    return backend.parts.ingestion


def _session(sid: str, text: str) -> dict[str, Any]:
    return {
        "session_id": sid,
        "events": [{"author": "user", "role": "user", "text": text, "timestamp": 1.7e9}],
    }


def _error(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    return r.json()["error"]


def _texts(http: TestClient) -> list[str]:
    return [m["text"] for m in http.get("/v1/memories", params=ANA).json()["memories"]]


# -- too much to embed in one synchronous add: 413 -------------------------------------------
def test_memories_with_too_much_to_embed_are_413_and_nothing_is_stored(http: TestClient) -> None:
    notes = [{"text": "a" * 150}, {"text": "b", "key_text": "c" * 100}]  # key text is embedded
    err = _error(http.post("/v1/memories", json={**ANA, "memories": notes}), 413)
    assert err["field"] == "memories"
    assert err["message"] == (
        f"memories: 250 characters to embed, over the limit of {LIMIT} for one synchronous "
        f"add (server.max_sync_embed_chars); send them in smaller requests"
    )
    assert _texts(http) == []
    r = http.post("/v1/memories", json={**ANA, "memories": notes[:1]})
    assert r.status_code == 201, r.text


def test_a_session_with_too_much_to_embed_is_413_pointing_at_wait_false(
    http: TestClient, backend: LocalBackend
) -> None:
    body = {**ANA, "session": _session("s1", "I moved to Lisbon last spring. " * 10)}
    err = _error(http.post("/v1/memories", json=body), 413)
    assert err["field"] == "session" and "?wait=false to queue its ingestion" in err["message"]
    assert "310 characters to embed" in err["message"]
    # The way the message names: queued, then ingested off the request.
    r = http.post("/v1/memories", params={"wait": "false"}, json=body)
    assert r.status_code == 202, r.text
    job = _jobs(backend).queue.wait("app", "ana", r.json()["job_id"], timeout_s=30)
    assert job.status == "done" and any("Lisbon" in t for t in _texts(http))


def test_ending_a_large_session_with_wait_is_413_and_leaves_it_open(http: TestClient) -> None:
    assert http.post("/v1/sessions", json={**ANA, "session_id": "s1"}).status_code == 201
    event = {"author": "user", "role": "user", "text": "My parrot Kiwi sings. " * 10}
    r = http.post("/v1/sessions/s1/events", json={**ANA, "events": [event]})
    assert r.status_code == 200, r.text
    err = _error(http.post("/v1/sessions/s1:end", params={"wait": "true"}, json=ANA), 413)
    assert err["field"] == "session" and "end it without ?wait=true" in err["message"]
    assert http.get("/v1/sessions/s1", params=ANA).json()["ended_at"] is None
    assert http.post("/v1/sessions/s1:end", json=ANA).status_code == 202


# -- one key's pending jobs are bounded: 429 -------------------------------------------------
def test_a_key_past_its_pending_jobs_is_429_and_another_key_still_queues(
    http: TestClient, backend: LocalBackend
) -> None:
    _jobs(backend).worker.stop(timeout=5)  # nothing drains: the jobs stay pending
    queued = [
        http.post(
            "/v1/memories", params={"wait": "false"}, json={**ANA, "session": _session(s, "hi")}
        )
        for s in ("s1", "s2")
    ]
    assert [r.status_code for r in queued] == [202, 202]
    third = {**ANA, "session": _session("s3", "hi")}
    err = _error(http.post("/v1/memories", params={"wait": "false"}, json=third), 429)
    assert "ingestion jobs pending" in err["message"]
    assert "ingestion.jobs.max_pending_per_key" in err["message"]
    # Ending a session would queue one more: refused before the session is ended.
    assert http.post("/v1/sessions", json={**ANA, "session_id": "open"}).status_code == 201
    _error(http.post("/v1/sessions/open:end", json=ANA), 429)
    assert http.get("/v1/sessions/open", params=ANA).json()["ended_at"] is None
    # Another client of the same app is not held up by this one's backlog.
    other = _client(backend, OTHER_KEY)
    r = other.post("/v1/memories", params={"wait": "false"}, json=third)
    assert r.status_code == 202, r.text
    # Once one of the first key's jobs is done, it may queue again.
    _jobs(backend).queue.finish(queued[0].json()["job_id"], 0)
    third["session"]["session_id"] = "s4"
    r = http.post("/v1/memories", params={"wait": "false"}, json=third)
    assert r.status_code == 202, r.text


def test_a_key_past_its_pending_characters_is_429(http: TestClient, backend: LocalBackend) -> None:
    _jobs(backend).worker.stop(timeout=5)
    big = {**ANA, "session": _session("s1", "x" * 1_500)}
    assert http.post("/v1/memories", params={"wait": "false"}, json=big).status_code == 202
    big["session"]["session_id"] = "s2"
    err = _error(http.post("/v1/memories", params={"wait": "false"}, json=big), 429)
    assert "over the limit of 2000 (ingestion.jobs.max_pending_chars_per_key)" in err["message"]
