"""OpenAPI of the real app: the bearer key scheme (the docs' Authorize button), stable
unique operation ids, and both clients covering every operation with the same calls."""

from __future__ import annotations

import inspect

from fastapi import FastAPI
from fastapi.testclient import TestClient

from mnemoray.client import AsyncMnemorayClient, MnemorayClient, memory_calls, session_calls
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.service.service import MemoryService
from tests.support.client_fixtures import KEY, JobsBackend, api  # noqa: F401  (api: a fixture)

OPERATION_IDS = {
    ("get", "/healthz"): "healthz",
    ("get", "/metrics"): "metrics",
    ("post", "/v1/recall"): "recall",
    ("get", "/v1/recall"): "search",
    ("post", "/v1/memories"): "add_memories",
    ("get", "/v1/memories"): "list_memories",
    ("delete", "/v1/memories/{memory_id}"): "forget_memory",
    ("patch", "/v1/memories/{memory_id}"): "edit_memory",
    ("delete", "/v1/users/{app_name}/{user_id}/memories"): "forget_user",
    ("get", "/v1/memories/forgotten"): "forgotten",
    ("get", "/v1/memories/{memory_id}/versions"): "memory_versions",
    ("post", "/v1/memories:forget"): "forget_by_query",
    ("post", "/v1/sessions"): "create_session",
    ("get", "/v1/sessions"): "list_sessions",
    ("get", "/v1/sessions/{session_id}"): "get_session",
    ("post", "/v1/sessions/{session_id}/events"): "append_events",
    ("post", "/v1/sessions/{session_id}:end"): "end_session",
    ("post", "/v1/context:compile"): "compile_context",
    ("get", "/v1/jobs/{job_id}"): "get_job",
    ("post", "/v1/jobs/{job_id}:retry"): "retry_job",
    ("put", "/v1/artifacts/{app_name}/{user_id}/{session_id}/{name}"): "put_artifact",
    ("get", "/v1/artifacts/{app_name}/{user_id}/{session_id}/{name}"): "get_artifact",
    ("get", "/v1/artifacts/{app_name}/{user_id}/{session_id}/{name}/versions"): "artifact_versions",
    ("get", "/v1/artifacts/{app_name}/{user_id}/{session_id}"): "artifact_names",
}
# Operations a client covers under another name (or two: preview, then confirm).
CLIENT_NAMES = {
    "compile_context": ("compile",),
    "forget_by_query": ("preview_forget", "confirm_forget"),
}


def operations(spec: dict) -> dict[tuple[str, str], dict]:
    return {(method, path): op for path, ops in spec["paths"].items() for method, op in ops.items()}


def test_openapi_declares_the_bearer_key_and_stable_operation_ids(api: FastAPI) -> None:  # noqa: F811
    spec = api.openapi()
    assert spec["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    ops = operations(spec)
    for key, op in ops.items():  # every route but liveness needs the key
        assert op.get("security") == ([{"ApiKey": []}] if key != ("get", "/healthz") else None), key
    ids = [op["operationId"] for op in ops.values()]
    assert len(ids) == len(set(ids)) and all(i.isidentifier() for i in ids)
    assert {k: ops[k]["operationId"] for k in OPERATION_IDS} == OPERATION_IDS
    compiled = ops[("post", "/v1/context:compile")]["responses"]["200"]
    assert compiled["content"]["application/json"]["schema"]["$ref"].endswith("/CompiledRequestOut")


def test_the_docs_page_offers_authorize(tmp_path) -> None:
    service = MemoryService.open(tmp_path / "m", embedder=None)
    backend = JobsBackend(service, tmp_path)
    try:
        http = HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"}), docs=True)
        api = build_api(backend, http)  # type: ignore[arg-type]
        page = TestClient(api).get("/docs")
        spec = TestClient(api).get("/openapi.json").json()
    finally:
        backend.jobs.stop()
        service.close()
    assert page.status_code == 200 and '"persistAuthorization": true' in page.text
    assert "ApiKey" in spec["components"]["securitySchemes"]


def test_both_clients_cover_every_operation_with_the_same_calls(api: FastAPI) -> None:  # noqa: F811
    builders = {
        name
        for module in (memory_calls, session_calls)
        for name, fn in vars(module).items()
        if inspect.isfunction(fn)
        and fn.__module__ == module.__name__
        and str(inspect.signature(fn).return_annotation).startswith("Call[")
    }
    for cls in (MnemorayClient, AsyncMnemorayClient):
        assert all(
            getattr(cls, name).__wrapped__
            is getattr(memory_calls if hasattr(memory_calls, name) else session_calls, name)
            for name in builders
        ), cls
    for op in operations(api.openapi()).values():
        for name in CLIENT_NAMES.get(op["operationId"], (op["operationId"],)):
            assert name in builders, op["operationId"]
    assert inspect.iscoroutinefunction(AsyncMnemorayClient.recall)
    assert str(inspect.signature(MnemorayClient.recall).return_annotation) == "RecallResponse"
