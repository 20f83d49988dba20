"""The HTTP edge without Ray: the routers over a test backend, and the error mapping
(status by class, 500 + request id and no internals for bugs and damaged stores)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.client import MnemorayAPIError, MnemorayClient, NotFoundAPIError
from mnemoray.compiler.template import TemplateError
from mnemoray.errors import (
    ConfigError,
    Conflict,
    Forbidden,
    InvalidInput,
    MnemorayError,
    NotFound,
    PayloadTooLarge,
    StoreCorrupt,
    Unauthorized,
    Unavailable,
)
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import ApiBackend, HttpConfig
from mnemoray.http.errors import INTERNAL_MESSAGE
from mnemoray.http.metrics import Metrics
from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.sessions.types import SessionNotFoundError
from mnemoray.summarizers.errors import ModelRequestError

KEY = "routes-test-key-0123456789"
WHO = {"app_name": "app", "user_id": "ana"}
SERVE = Path(__file__).parents[2] / "mnemoray" / "serve"


class FakeBackend:
    """Sessions and artifacts in memory; recall / memory ops answer or raise as told."""

    def __init__(self, jobs_db: Path | None = None) -> None:
        self.metrics = Metrics(lambda: {})
        self.sessions = InMemorySessionStore()
        # The real queue (a test runs its jobs by hand), in a folder of its own if not given.
        self._tmp = tempfile.TemporaryDirectory(prefix="mnemoray-jobs-")
        self.jobs = JobQueue(jobs_db or Path(self._tmp.name) / "jobs.db")
        self.artifacts = InMemoryArtifactStore()
        self.fail: BaseException | None = None
        self.forgotten = 1

    def _maybe_fail(self) -> None:
        if self.fail is not None:
            raise self.fail

    async def recall(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        self._maybe_fail()
        echo = [query, top_k, filters, mode] + ([budget_tokens] if budget_tokens else [])
        return {"memories": [], "store_version": 1, "echo": echo}

    async def recall_app(
        self,
        app_name: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        self._maybe_fail()
        echo = [query, top_k, filters, mode] + ([budget_tokens] if budget_tokens else [])
        return {"memories": [], "store_version": 1, "echo": echo}

    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        self._maybe_fail()
        if op == "forget_memory":
            return self.forgotten
        return {"added": 0, "memories": []}

    async def run_io(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *args, **kwargs)
        )

    async def compile(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        agent: Mapping[str, Any],
        new_message: str | None,
        temp_state: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        self._maybe_fail()
        return {"system_instruction": agent.get("instruction", "")}

    def end_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        wait: bool = False,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        session = self.sessions.get_session(app_name, user_id, session_id)
        if not session.ended:
            self.sessions.end_session(session)
        job = self.jobs.enqueue(app_name, user_id, session_id, kind="session_end")
        out = {"session_id": session_id, "ended_at": session.ended_at}
        if wait:
            self.jobs.finish(job.job_id, 0)
            return {**out, "ingestion": {"status": "unchanged"}}
        return {**out, "job_id": job.job_id}

    def enqueue_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        job = self.jobs.enqueue(
            app_name,
            user_id,
            str(session.get("session_id")),
            kind="add_session",
            payload=dict(session),
        )
        return {"job_id": job.job_id, "status": job.status}

    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.jobs.get(app_name, user_id, job_id).public()

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.jobs.retry(app_name, user_id, job_id).public()


@pytest.fixture
def backend(tmp_path: Path) -> FakeBackend:
    return FakeBackend(tmp_path / "jobs.db")


@pytest.fixture
def client(backend: FakeBackend) -> TestClient:
    typed: ApiBackend = backend  # the test double satisfies the protocol
    app = build_api(typed, HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"}), max_body_bytes=4096))
    # raise_server_exceptions off: assert on the answer a real client would get.
    return TestClient(
        app, headers={"Authorization": f"Bearer {KEY}"}, raise_server_exceptions=False
    )


def recall(c: TestClient, **extra: Any) -> httpx.Response:
    return c.post("/v1/recall", json={**WHO, "query": "tulips", **extra})


def error_of(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["status"] == status
    assert err["request_id"] and r.headers["x-request-id"] == err["request_id"]
    return err


# -- status by class -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "exc, status",
    [
        (InvalidInput("must be >= 1", field="top_k"), 422),
        (ConfigError("unknown", field="mode"), 422),
        (PayloadTooLarge("too big", field="memories"), 413),
        (NotFound("no such thing"), 404),
        (SessionNotFoundError("app", "ana", "s9"), 404),
        (Conflict("already there"), 409),
        (Unauthorized("who are you", field="authorization"), 401),
        (Forbidden("not yours", field="app_name"), 403),
        (Unavailable("model backend down"), 503),
    ],
)
def test_library_errors_map_to_their_class_status(
    client: TestClient, backend: FakeBackend, exc: MnemorayError, status: int
) -> None:
    backend.fail = exc
    err = error_of(recall(client), status)
    assert err["message"] == str(exc) and err["field"] == exc.field


def test_unauthorized_asks_for_a_bearer_token(client: TestClient, backend: FakeBackend) -> None:
    backend.fail = Unauthorized("who are you")
    assert recall(client).headers["www-authenticate"] == "Bearer"


def test_a_bug_is_500_with_a_request_id_and_no_internals(
    client: TestClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    backend.fail = RuntimeError("boom at /srv/secret/path")
    with caplog.at_level(logging.ERROR, logger="ray.serve"):
        r = recall(client)
    err = error_of(r, 500)
    assert err["message"] == INTERNAL_MESSAGE and err["field"] is None
    assert "secret" not in r.text and "RuntimeError" not in r.text
    logged = [rec for rec in caplog.records if err["request_id"] in rec.getMessage()]
    assert logged and logged[0].exc_info and "secret" in logged[0].getMessage()


def test_a_private_error_keeps_its_status_but_not_its_message(
    client: TestClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    backend.fail = ModelRequestError(
        "POST http://10.0.0.7:8001/v1/chat -> HTTP 400: bad", status=400
    )
    with caplog.at_level(logging.ERROR, logger="ray.serve"):
        r = recall(client)
    err = error_of(r, 503)
    assert "10.0.0.7" not in r.text and "request_id" in err["message"]
    assert any(
        err["request_id"] in rec.getMessage() and "10.0.0.7" in rec.getMessage()
        for rec in caplog.records
    )


def test_a_library_value_error_is_not_a_client_error(
    client: TestClient, backend: FakeBackend
) -> None:
    # Only InvalidInput is the caller's fault: a stray ValueError is our bug.
    backend.fail = ValueError("top_k: looks like a field but is an internal error")
    err = error_of(recall(client), 500)
    assert err["field"] is None and "top_k" not in err["message"]


def test_a_damaged_store_is_500_without_its_message(
    client: TestClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    backend.fail = StoreCorrupt("manifest: /data/store/manifest.json is not a valid manifest")
    with caplog.at_level(logging.ERROR, logger="ray.serve"):
        r = client.get("/v1/memories", params=WHO)
    err = error_of(r, 500)
    assert "manifest" not in r.text and err["message"] == INTERNAL_MESSAGE
    assert any(
        err["request_id"] in rec.getMessage() and "manifest.json" in rec.getMessage()
        for rec in caplog.records
    )


def test_an_error_from_another_replica_maps_by_its_cause(
    client: TestClient, backend: FakeBackend
) -> None:
    class RemoteError(Exception):  # what a Ray task error looks like: the cause inside
        def __init__(self, cause: BaseException) -> None:
            super().__init__("Traceback (most recent call last): ...")
            self.cause = cause

    backend.fail = RemoteError(InvalidInput("malformed", field="cursor"))
    err = error_of(client.get("/v1/memories", params=WHO), 422)
    assert err["field"] == "cursor" and "Traceback" not in err["message"]


# -- request ids, validation, auth ---------------------------------------------------------
def test_request_id_header_on_every_answer(client: TestClient) -> None:
    ok = client.get("/healthz")
    assert ok.status_code == 200 and len(ok.headers["x-request-id"]) == 32
    mine = client.get("/healthz", headers={"X-Request-ID": "trace-42.a"})
    assert mine.headers["x-request-id"] == "trace-42.a"
    weird = client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert weird.headers["x-request-id"] != "bad id\twith spaces"
    assert error_of(client.get("/v1/nothing-here"), 404)["field"] is None


def test_behind_a_proxy_that_sets_the_id_it_is_used_not_repeated(backend: FakeBackend) -> None:
    # Ray Serve's proxy puts x-request-id in the request and adds it to the response.
    app = build_api(backend, HttpConfig(allow_remote_without_keys=True, echo_request_id=False))
    r = TestClient(app).get(
        "/v1/sessions/nope", params=WHO, headers={"X-Request-ID": "3f1c-serve-id"}
    )
    assert r.status_code == 404 and "x-request-id" not in r.headers
    assert r.json()["error"]["request_id"] == "3f1c-serve-id"


def test_validation_errors_keep_their_400_and_422(client: TestClient) -> None:
    bad_json = client.post(
        "/v1/recall", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert error_of(bad_json, 400)["field"] == "body"
    err = error_of(recall(client, top_k=0), 422)
    assert err["field"] == "top_k" and err["errors"][0]["field"] == "top_k"
    assert error_of(
        client.post(
            "/v1/recall", content=b"x" * 5000, headers={"Content-Type": "application/json"}
        ),
        413,
    )


def test_keys_401_and_403(client: TestClient) -> None:
    anon = client.post("/v1/recall", json={**WHO, "query": "q"}, headers={"Authorization": ""})
    err = error_of(anon, 401)
    assert err["field"] == "authorization" and anon.headers["www-authenticate"] == "Bearer"
    other = error_of(
        client.post("/v1/recall", json={"app_name": "other", "user_id": "ana", "query": "q"}), 403
    )
    assert other["field"] == "app_name" and "'other'" in other["message"]
    assert client.get("/healthz", headers={"Authorization": ""}).status_code == 200
    assert error_of(client.get("/metrics", headers={"Authorization": ""}), 401)


def test_every_route_needs_a_key_for_its_app(client: TestClient) -> None:
    """Every API route (listed from the OpenAPI schema, so a new route is covered too)
    answers 401 without a key or with an unknown one, and 403 for another app's data."""
    from benchmarks.hostile_requests import valid_bodies

    bodies = valid_bodies("other", "ana", "s1")
    spec = client.app.openapi()  # keys on: /openapi.json itself is closed by default
    routes = [
        (method.upper(), path)
        for path, ops in spec["paths"].items()
        for method in ops
        if path.startswith("/v1/") or path == "/metrics"
    ]
    assert len(routes) >= 17
    checked = 0
    for method, template in routes:
        path = template.format(
            app_name="other",
            user_id="ana",
            session_id="s1",
            name="n.txt",
            memory_id="m1",
            job_id="j1",
        )
        body = bodies.get((method, path))
        content = json.dumps(body).encode() if body else b"{}"
        for auth in ("", "Bearer not-a-key-0000000000"):
            r = client.request(
                method,
                path,
                content=content,
                params=WHO,
                headers={"Authorization": auth, "content-type": "application/json"},
            )
            assert r.status_code == 401, (method, path, auth, r.text)
        if template in ("/metrics", "/v1/apps"):  # /v1/apps names no app: it lists only
            continue  # the key's own (tests/http/test_inspector.py)
        params = {"app_name": "other", "user_id": "ana", "query": "q", "entity": "Berlin"}
        r = client.request(
            method,
            path,
            content=content,
            params=params,
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        checked += 1
    assert checked >= 16


def test_open_server_refuses_remote_clients(backend: FakeBackend) -> None:
    # Client "testclient" (not loopback), addressed to a loopback name.
    c = TestClient(
        build_api(backend), raise_server_exceptions=False, base_url="http://127.0.0.1:8000"
    )
    assert error_of(c.get("/v1/sessions", params=WHO), 403)["field"] is None
    opened = TestClient(build_api(backend, HttpConfig(allow_remote_without_keys=True)))
    assert opened.get("/v1/sessions", params=WHO).json() == {"sessions": []}


# -- the routes over the backend -------------------------------------------------------------
def test_recall_routes_pass_the_request_through(client: TestClient) -> None:
    body = recall(client, top_k=3, mode="keyword", filters={"session_id": "s1"}).json()
    assert body["echo"] == ["tulips", 3, {"session_id": "s1"}, "keyword"]
    assert body["took_ms"] >= 0
    got = client.get(
        "/v1/recall",
        params={**WHO, "query": "tulips", "after": "1700000000", "kinds": ["fact", "chunk"]},
    ).json()
    assert got["echo"] == ["tulips", 5, {"after": 1.7e9, "kinds": ["fact", "chunk"]}, None]
    # A token budget goes through both; a bad one is a 422 naming it.
    assert recall(client, budget_tokens=500).json()["echo"][-1] == 500
    got = client.get("/v1/recall", params={**WHO, "query": "tulips", "budget_tokens": 40})
    assert got.json()["echo"][-1] == 40
    assert "budget_tokens" in error_of(recall(client, budget_tokens=0), 422)["field"]


def test_forgetting_nothing_is_404_naming_the_memory(
    client: TestClient, backend: FakeBackend
) -> None:
    assert client.delete("/v1/memories/m1", params=WHO).json() == {"forgotten": 1}
    backend.forgotten = 0
    err = error_of(client.delete("/v1/memories/m1", params=WHO), 404)
    assert err["field"] == "memory_id" and "'m1'" in err["message"]


def test_session_routes_and_their_errors(client: TestClient) -> None:
    assert client.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    assert error_of(client.post("/v1/sessions", json={**WHO, "session_id": "s1"}), 409)
    ev = {"author": "user", "role": "user", "text": "hi", "id": "e1"}
    ok = client.post("/v1/sessions/s1/events", json={**WHO, "events": [ev], "expected_version": 0})
    assert ok.status_code == 200 and ok.json()["version"] == 1
    stale = error_of(
        client.post(
            "/v1/sessions/s1/events",
            json={**WHO, "events": [{**ev, "id": "e2"}], "expected_version": 0},
        ),
        409,
    )
    assert stale["field"] == "expected_version"
    assert error_of(client.post("/v1/sessions/s1/events", json={**WHO, "events": [ev]}), 409)
    bad = error_of(
        client.post(
            "/v1/sessions/s1/events",
            json={
                **WHO,
                "events": [{"author": "user", "text": "fine"}, {"author": "user", "role": "robot"}],
            },
        ),
        422,
    )
    assert bad["field"] == "events[1].role" and bad["message"].startswith("events[1].role: ")
    assert error_of(client.get("/v1/sessions/nope", params=WHO), 404)
    end = client.post("/v1/sessions/s1:end", json=WHO)
    assert end.status_code == 202 and end.json()["session_id"] == "s1"
    assert set(end.json()) == {"session_id", "ended_at", "job_id"}
    ended = client.post(
        "/v1/sessions/s1/events",
        json={**WHO, "events": [{"author": "user", "text": "late", "id": "e9"}]},
    )
    assert error_of(ended, 409)
    assert [s["session_id"] for s in client.get("/v1/sessions", params=WHO).json()["sessions"]] == [
        "s1"
    ]


def test_a_session_read_back_holds_no_temp_state(client: TestClient) -> None:
    created = client.post("/v1/sessions", json={**WHO, "session_id": "s1", "state": {"temp:a": 1}})
    assert created.status_code == 201 and created.json()["state"] == {}
    ev = {"author": "user", "text": "pin", "id": "e1", "state_delta": {"temp:pin": 4711, "n": 1}}
    assert client.post("/v1/sessions/s1/events", json={**WHO, "events": [ev]}).status_code == 200
    got = client.get("/v1/sessions/s1", params=WHO)
    assert got.status_code == 200 and "temp:" not in got.text and "4711" not in got.text
    assert got.json()["state"] == {"n": 1}
    assert got.json()["events"][0]["state_delta"] == {"n": 1}


def test_end_answers_202_with_a_job_and_wait_keeps_the_report(
    client: TestClient, backend: FakeBackend
) -> None:
    client.post("/v1/sessions", json={**WHO, "session_id": "s1"})
    end = client.post("/v1/sessions/s1:end", json=WHO)
    assert end.status_code == 202, end.text
    job_id = end.json()["job_id"]
    job = client.get(f"/v1/jobs/{job_id}", params=WHO)
    assert job.status_code == 200
    assert job.json() == {"job_id": job_id, "status": "queued", "memories_added": 0, "error": None}
    waited = client.post("/v1/sessions/s1:end", params={"wait": "true"}, json=WHO)
    assert waited.status_code == 200 and waited.json()["ingestion"]["status"] == "unchanged"
    assert "job_id" not in waited.json()
    assert error_of(client.post("/v1/sessions/nope:end", json=WHO), 404)


def test_jobs_are_404_for_other_tenants_and_retry_only_failed_ones(
    client: TestClient, backend: FakeBackend
) -> None:
    client.post("/v1/sessions", json={**WHO, "session_id": "s1"})
    job_id = client.post("/v1/sessions/s1:end", json=WHO).json()["job_id"]
    other = error_of(client.get(f"/v1/jobs/{job_id}", params={**WHO, "user_id": "bob"}), 404)
    assert other["field"] == "job_id"
    assert error_of(
        client.get(f"/v1/jobs/{job_id}", params={**WHO, "app_name": "other"}), 403
    )  # the key is for "app" only
    assert error_of(client.post(f"/v1/jobs/{job_id}:retry", json=WHO), 409)
    backend.jobs.claim()
    backend.jobs.fail(job_id, "summarizer: backend down")
    failed = client.get(f"/v1/jobs/{job_id}", params=WHO).json()
    assert failed["status"] == "failed" and failed["error"] == "summarizer: backend down"
    retried = client.post(f"/v1/jobs/{job_id}:retry", json=WHO)
    assert retried.status_code == 202 and retried.json()["status"] == "queued"
    assert error_of(client.post(f"/v1/jobs/{job_id}:retry", json={**WHO, "user_id": "bob"}), 404)


def test_add_session_in_the_background_keeps_the_posted_session(
    client: TestClient, backend: FakeBackend
) -> None:
    session = {"app_name": "app", "user_id": "ana", "session_id": "s7", "events": []}
    r = client.post("/v1/memories", params={"wait": "false"}, json={**WHO, "session": session})
    assert r.status_code == 202, r.text
    job = backend.jobs.get("app", "ana", r.json()["job_id"])
    assert job.payload == session and job.status == "queued"
    sync = client.post("/v1/memories", json={**WHO, "session": session})
    assert sync.status_code == 201 and sync.json()["added"] == 0


def client_over(client: TestClient) -> MnemorayClient:
    """The Python client, its requests answered by the in-process app."""

    def transport(request: httpx.Request) -> httpx.Response:
        r = client.request(
            request.method,
            request.url.path,
            params=request.url.params,
            content=request.content,
            headers=dict(request.headers),
        )
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    return MnemorayClient("http://test", KEY, transport=httpx.MockTransport(transport))


def test_the_client_follows_a_job(client: TestClient, backend: FakeBackend) -> None:
    with client_over(client) as mr:
        mr.create_session("app", "ana", "s1")
        job_id = mr.end_session("app", "ana", "s1").job_id
        assert mr.wait_for_job("app", "ana", job_id, timeout_s=0.05).status == "queued"
        claimed = backend.jobs.claim()
        assert claimed is not None and claimed.job_id == job_id
        backend.jobs.finish(job_id, 4)
        assert mr.wait_for_job("app", "ana", job_id).model_dump() == {
            "job_id": job_id,
            "status": "done",
            "memories_added": 4,
            "error": None,
        }
        assert mr.end_session("app", "ana", "s1", wait=True).ingestion.status == "unchanged"
        with pytest.raises(NotFound):
            mr.get_job("app", "bob", job_id)


def test_compile_template_error_names_the_agent_field(
    client: TestClient, backend: FakeBackend
) -> None:
    body = {**WHO, "session_id": "s1", "agent": {"name": "h", "instruction": "Hi {nope}"}}
    assert client.post("/v1/context:compile", json=body).json()["system_instruction"] == "Hi {nope}"
    backend.fail = TemplateError("nope", "state key is missing")
    err = error_of(client.post("/v1/context:compile", json=body), 422)
    assert err["field"] == "agent.instruction" and "{nope}" in err["message"]


def test_artifact_routes(client: TestClient) -> None:
    base = "/v1/artifacts/app/ana/s1"
    put = client.put(
        base + "/notes.txt",
        content=b"hello",
        params={"summary": "first"},
        headers={"Content-Type": "text/plain"},
    )
    assert put.status_code == 201 and put.json()["version"] == 0
    got = client.get(base + "/notes.txt")
    assert got.content == b"hello" and got.headers["x-artifact-summary"] == "first"
    assert client.get(base + "/notes.txt/versions").json()["versions"] == [0]
    assert client.get(base).json() == {"names": ["notes.txt"]}
    assert error_of(client.get(base + "/nope/versions"), 404)
    assert error_of(client.get(base + "/notes.txt", params={"version": 5}), 404)
    bad = error_of(client.put(base + "/bad%01name", content=b"x"), 422)
    assert bad["field"] == "name"


# -- the client maps answers back to the typed classes -----------------------------------------
def test_client_raises_the_typed_error(client: TestClient, backend: FakeBackend) -> None:
    with client_over(client) as mr:
        with pytest.raises(NotFound) as missing:
            mr.get_session("app", "ana", "nope")
        with pytest.raises(InvalidInput) as bad:
            mr.recall("app", "ana", "q", top_k=0)
        with pytest.raises(Forbidden):
            mr.recall("other", "ana", "q")
        backend.fail = Conflict("busy")
        with pytest.raises(Conflict):
            mr.recall("app", "ana", "q")
        backend.fail = RuntimeError("internal detail")
        with pytest.raises(MnemorayAPIError) as bug:
            mr.recall("app", "ana", "q")
    assert isinstance(missing.value, NotFoundAPIError) and missing.value.status == 404
    assert isinstance(missing.value, MnemorayAPIError) and missing.value.request_id
    assert bad.value.status == 422 and bad.value.field == "top_k"
    assert isinstance(bad.value, ValueError) and "top_k" in bad.value.message
    assert bug.value.status == 500 and not isinstance(bug.value, InvalidInput)
    assert bug.value.request_id and "internal detail" not in str(bug.value)


# -- layering ----------------------------------------------------------------------------------
def test_compile_agent_errors_are_agent_fields(client: TestClient) -> None:
    body = {**WHO, "session_id": "s1", "agent": {"name": "h", "tools": [{"no": "name"}]}}
    assert error_of(client.post("/v1/context:compile", json=body), 422)["field"] == "agent.tools[0]"


def test_openapi_lists_every_route_and_the_error_body(client: TestClient) -> None:
    spec = client.app.openapi()  # keys on: /openapi.json itself is closed by default
    assert {
        "/healthz",
        "/metrics",
        "/v1/recall",
        "/v1/memories",
        "/v1/memories/{memory_id}",
        "/v1/users/{app_name}/{user_id}/memories",
        "/v1/sessions",
        "/v1/sessions/{session_id}",
        "/v1/sessions/{session_id}/events",
        "/v1/sessions/{session_id}:end",
        "/v1/context:compile",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}:retry",
        "/v1/artifacts/{app_name}/{user_id}/{session_id}",
        "/v1/artifacts/{app_name}/{user_id}/{session_id}/{name}",
        "/v1/artifacts/{app_name}/{user_id}/{session_id}/{name}/versions",
    } <= set(spec["paths"])
    assert "request_id" in spec["components"]["schemas"]["ErrorBody"]["properties"]
