"""What the client tests run against: the real API (``build_api``) over a real
MemoryService, compiler and ingestion job queue (no Ray), and a tiny real ASGI app that
fails a given number of times before it answers (for the retry tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.http.ingestion import IngestionJobs
from mnemoray.memory.service.service import MemoryService
from mnemoray.settings.serve import parse_settings
from tests.support.service_backend import ServiceBackend

KEY = "client-test-key-0123456789"
ANA = ("app", "ana")


class JobsBackend(ServiceBackend):
    """ServiceBackend plus the replica's real ingestion jobs (queue + worker thread)."""

    def __init__(self, service: MemoryService, root: Path) -> None:
        super().__init__(service)
        settings = parse_settings({"store": str(root / "store")})
        self.jobs = IngestionJobs(settings, self.sessions, self._op_sync, self.metrics)
        self.end_session = self.jobs.end_session
        self.enqueue_session = self.jobs.enqueue_session
        self.get_job = self.jobs.get_job
        self.retry_job = self.jobs.retry_job

    def _op_sync(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        return self.ops.call(op, app_name, user_id, kwargs)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FastAPI]:
    service = MemoryService.open(tmp_path / "memories", embedder=None)
    backend = JobsBackend(service, tmp_path)
    yield build_api(
        backend,  # type: ignore[arg-type]
        HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})),
    )
    backend.jobs.stop()
    service.close()


RECALL_OK = {"memories": [], "took_ms": 0.1, "store_version": 3}


class Flaky:
    """A real ASGI app: the first ``fails`` requests get ``status`` (with
    ``Retry-After`` when given), later ones ``final`` (200: with ``body``; else an error
    body). ``calls`` records each request as ``(method, path)``."""

    def __init__(
        self,
        fails: int,
        status: int = 503,
        retry_after: str | None = None,
        body: Mapping[str, Any] = RECALL_OK,
        final: int = 200,
    ) -> None:
        self.fails, self.status, self.retry_after = fails, status, retry_after
        self.final = final
        self.body = json.dumps(body).encode()
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        self.calls.append((scope["method"], scope["path"]))
        status = self.status if len(self.calls) <= self.fails else self.final
        if status != 200:
            body = json.dumps(
                {
                    "error": {
                        "status": status,
                        "message": "busy, try again",
                        "request_id": f"r{len(self.calls)}",
                    }
                }
            ).encode()
        else:
            body = self.body
        headers = [(b"content-type", b"application/json")]
        if self.retry_after is not None and status != 200:
            headers.append((b"retry-after", self.retry_after.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
