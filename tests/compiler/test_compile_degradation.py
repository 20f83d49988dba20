"""Graceful degradation: when recall, the embedder or the memory store fails
during a compile, the compile still answers, without the memory block; the trace names
the failed step and the error, ``/metrics`` counts it, and the ``load_memory`` tool
answers an error the model can read instead of raising."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mnemoray.compiler import AgentSpec, Compiler, MemorySnippet, Services, StepError
from mnemoray.embedders import EmbedderError
from mnemoray.errors import InvalidInput, NotFound, StoreCorrupt, Unavailable
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.events import user_message
from mnemoray.sessions.session import Session
from tests.support.factories import assert_compiled_without_memory
from tests.support.service_backend import ServiceBackend

KEY = "degradation-test-key-0123456789"
AGENT = {
    "name": "helper",
    "static_instruction": "You are helpful.",
    "memory_preload": True,
    "memory_tools": ["load_memory"],
}
DEGRADED_METRIC = 'mnemoray_compile_degraded_total{error="StoreCorrupt",step="memory_preload"}'


def healthy_service(tmp_path: Path) -> MemoryService:
    service = MemoryService.open(tmp_path / "store", embedder=None)
    service.add_memories([Memory("app", "ana", "s0", "fact", "ana grows tulips", created_at=1.0)])
    return service


def damage(tmp_path: Path) -> None:
    """Garbage over the manifest: the next read of the store is a StoreCorrupt."""
    (tmp_path / "store" / "manifest.json").write_bytes(b"\xff\xfe\x00\x01garbage")


def live_session() -> Session:
    session = Session("app", "ana", "chat")
    session.apply(user_message("what do I grow?"))
    return session


def compile_with(search: Callable[..., Any]) -> Any:
    return Compiler.default().compile(
        live_session(),
        AgentSpec(**AGENT),
        new_message="tulips",
        services=Services(memory_search=search),
    )


def preload_step(trace: list[Any]) -> Any:
    return next(s for s in trace if s.name == "memory_preload")


def failing(exc: BaseException) -> Callable[..., Any]:
    def search(app_name: str, user_id: str, query: str, top_k: int) -> list[MemorySnippet]:
        raise exc

    return search


# -- in process ---------------------------------------------------------------------------------
def test_a_compile_over_a_damaged_store_answers_without_memories(tmp_path: Path) -> None:
    service = healthy_service(tmp_path)
    before = compile_with(service.memory_search())
    assert before.contents[-2].text.startswith("<memory>") and before.degraded == []
    assert preload_step(before.trace).error is None
    damage(tmp_path)
    req = compile_with(service.memory_search())
    assert all("<memory>" not in c.text for c in req.contents)
    # The memories sat before the message: the system instruction is as it was.
    assert req.system_instruction == before.system_instruction
    assert [c.text for c in req.contents] == [
        c.text for c in before.contents if c is not before.contents[-2]
    ]
    assert any(t["name"] == "load_memory" for t in req.tools)  # declarations stay stable
    assert req.contents[-1].text == "tulips"
    step = preload_step(req.trace)
    assert step.error == StepError("memory_preload", "StoreCorrupt", step.error.message)
    assert step.tokens_added > 0  # the load_memory declaration, no memory block
    assert req.degraded == [step.error]
    assert req.total_tokens == sum(s.tokens_added for s in req.trace)
    data = req.to_dict()
    json.dumps(data)
    assert data["degraded"] == [
        {"step": "memory_preload", "error": "StoreCorrupt", "message": step.error.message}
    ]
    traced = next(s for s in data["trace"] if s["name"] == "memory_preload")
    assert traced["error"] == data["degraded"][0]
    # StoreCorrupt is not public: its message names the store's path, the trace must not.
    assert str(tmp_path) not in json.dumps(data) and "manifest" not in step.error.message


@pytest.mark.parametrize(
    "exc, error, shown",
    [
        (
            Unavailable("the Index replica for shard 3 is not answering"),
            "Unavailable",
            "the Index replica for shard 3 is not answering",
        ),
        (
            EmbedderError("could not load embedding model /models/x: bad file"),
            "EmbedderError",
            None,
        ),
        (RuntimeError("CUDA out of memory in /opt/secret/path"), "RuntimeError", None),
        (StoreCorrupt("shard 2 at /srv/store is unreadable"), "StoreCorrupt", None),
    ],
)
def test_a_failure_that_is_not_the_callers_degrades(
    exc: BaseException, error: str, shown: str | None
) -> None:
    req = compile_with(failing(exc))
    step = preload_step(req.trace)
    assert step.error is not None and step.error.step == "memory_preload"
    assert step.error.error == error
    if shown is not None:  # a public error says what happened
        assert shown in step.error.message
    else:  # internals (paths, a model's location) stay in the server log
        assert "/" not in step.error.message
    assert all("<memory>" not in c.text for c in req.contents) and req.degraded == [step.error]


def test_a_library_error_wrapped_by_another_process_is_named_by_its_cause() -> None:
    class TaskError(Exception):  # what a call to another Ray replica raises
        def __init__(self, cause: BaseException) -> None:
            super().__init__("task failed")
            self.cause = cause

    req = compile_with(failing(TaskError(StoreCorrupt("/srv/store is damaged"))))
    assert req.degraded[0].error == "StoreCorrupt"
    assert "/srv" not in req.degraded[0].message


@pytest.mark.parametrize(
    "exc", [InvalidInput("must be shorter", field="new_message"), NotFound("no such user")]
)
def test_a_callers_error_is_not_hidden(exc: BaseException) -> None:
    with pytest.raises(type(exc)):
        compile_with(failing(exc))


def test_load_memory_answers_an_error_the_model_can_read(tmp_path: Path) -> None:
    service = healthy_service(tmp_path)
    assert service.load_memory("app", "ana", "tulips")[0]["text"] == "ana grows tulips"
    damage(tmp_path)
    out = service.load_memory("app", "ana", "tulips")
    assert isinstance(out, dict) and set(out) == {"error"}
    assert out["error"].startswith("memory is unavailable: StoreCorrupt")
    assert str(tmp_path) not in out["error"]
    json.dumps(out)


def test_load_memory_still_raises_a_callers_error(tmp_path: Path) -> None:
    service = healthy_service(tmp_path)
    with pytest.raises(InvalidInput, match="query"):
        service.load_memory("app", "ana", "")
    with pytest.raises(InvalidInput, match="top_k"):
        service.load_memory("app", "ana", "tulips", top_k=0)


# -- over HTTP, without Ray -----------------------------------------------------------------------
def test_compile_over_http_with_an_unreadable_store_is_200_and_counted(tmp_path: Path) -> None:
    backend = ServiceBackend(healthy_service(tmp_path))
    backend.sessions.create_session("app", "ana", "chat")
    client = TestClient(
        build_api(
            backend,  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})),
        ),
        headers={"Authorization": f"Bearer {KEY}"},
        raise_server_exceptions=False,
    )
    body = {
        "app_name": "app",
        "user_id": "ana",
        "session_id": "chat",
        "agent": AGENT,
        "new_message": "tulips",
    }
    ok = client.post("/v1/context:compile", json=body)
    assert ok.status_code == 200, ok.text
    assert "<memory>" in ok.json()["contents"][-2]["parts"][0]["text"]
    assert ok.json()["degraded"] == []
    assert DEGRADED_METRIC not in client.get("/metrics").text
    damage(tmp_path)
    for _ in range(2):
        r = client.post("/v1/context:compile", json=body)
        assert r.status_code == 200, r.text
    out = r.json()
    assert_compiled_without_memory(out)
    assert str(tmp_path) not in r.text
    assert f"{DEGRADED_METRIC} 2.0" in client.get("/metrics").text
    # A caller's error is still the caller's: an invalid agent is a 422, not a degraded 200.
    bad = client.post(
        "/v1/context:compile", json={**body, "agent": {**AGENT, "include_contents": "all"}}
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "agent.include_contents"
    # The recall route itself still fails loudly: only the compile degrades.
    assert (
        client.post(
            "/v1/recall", json={"app_name": "app", "user_id": "ana", "query": "tulips"}
        ).status_code
        == 500
    )
