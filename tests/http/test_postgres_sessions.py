"""Two API replicas (``mnemoray ui``'s Ray-free backend, each its own process state) over
one memory store and one real PostgreSQL database for sessions and jobs: what one
replica writes the other reads, a stale writer on either gets 409, and a session ended
on one is ingested by a job either may run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mnemoray.http.app import build_api, http_config
from mnemoray.http.auth import ApiKeys
from mnemoray.http.local_backend import LocalBackend

KEY = "postgres-replica-key-0123456789"
WHO = {"app_name": "app", "user_id": "ana"}


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str) -> Iterator[list[TestClient]]:
    backends = [
        LocalBackend.open(
            str(tmp_path / "store"),
            sessions_db=postgres_url,
            models={"embedder": "none", "summarizer": "extractive"},
        )
        for _ in range(2)
    ]
    keys = ApiKeys.from_mapping({KEY: "app"})
    clients = [
        TestClient(
            build_api(b, http_config(b.settings.server, keys)),
            headers={"Authorization": f"Bearer {KEY}"},
        )
        for b in backends
    ]
    yield clients
    for b in backends:
        b.close()
    # Nothing of the sessions or jobs went to the store's directory.
    assert not list((tmp_path / "store").glob("*.db"))


def _event(text: str, event_id: str) -> dict[str, Any]:
    return {"author": "user", "role": "user", "text": text, "id": event_id}


def _texts(replica: TestClient) -> list[str]:
    return [m["text"] for m in replica.get("/v1/memories", params=WHO).json()["memories"]]


def test_replicas_share_sessions_and_jobs_through_postgres(replicas: list[TestClient]) -> None:
    a, b = replicas
    assert a.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    assert b.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 409
    first = a.post(
        "/v1/sessions/s1/events",
        json={**WHO, "events": [_event("I live in Lyon.", "e1")], "expected_version": 0},
    )
    assert first.status_code == 200 and first.json()["version"] == 1
    # The other replica holds the same stale copy: refused, nothing lost.
    stale = b.post(
        "/v1/sessions/s1/events",
        json={**WHO, "events": [_event("I live in Nice.", "e2")], "expected_version": 0},
    )
    assert stale.status_code == 409 and stale.json()["error"]["field"] == "expected_version"
    got = b.get("/v1/sessions/s1", params=WHO).json()
    assert [e["text"] for e in got["events"]] == ["I live in Lyon."] and got["version"] == 1
    end = b.post("/v1/sessions/s1:end", json=WHO)
    assert end.status_code == 202
    job_id = end.json()["job_id"]
    deadline = time.monotonic() + 30
    while (job := a.get(f"/v1/jobs/{job_id}", params=WHO).json())["status"] in (
        "queued",
        "running",
    ) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job["status"] == "done" and job["memories_added"] > 0
    # Whichever replica ran it, both read the commit (each reloads the store's manifest).
    for replica in (a, b):
        deadline = time.monotonic() + 10
        while "I live in Lyon." not in _texts(replica) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "I live in Lyon." in _texts(replica)
    # Another tenant sees neither the session nor the job.
    bob = {**WHO, "user_id": "bob"}
    assert a.get("/v1/sessions/s1", params=bob).status_code == 404
    assert b.get(f"/v1/jobs/{job_id}", params=bob).status_code == 404
