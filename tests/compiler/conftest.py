from __future__ import annotations

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
from mnemoray.sessions.session import Session
from tests.support.service_backend import ServiceBackend


@pytest.fixture
def make_session() -> Callable[..., Session]:
    """A session holding ``events`` (state deltas applied), with stable ids."""

    def make(*events: Event, state: dict | None = None, session_id: str = "s1") -> Session:
        session = Session(
            app_name="app", user_id="u1", session_id=session_id, state=dict(state or {})
        )
        for event in events:
            session.apply(event)
        return session

    return make


HTTP_KEY = "compiler-http-test-key-0123456789"


@pytest.fixture
def make_http(tmp_path: Path) -> Callable[..., tuple[TestClient, ServiceBackend]]:
    """The HTTP API over a real MemoryService and compiler (no Ray), and its backend."""

    def make(**http: Any) -> tuple[TestClient, ServiceBackend]:
        backend = ServiceBackend(MemoryService.open(tmp_path / "store", embedder=None))
        api = build_api(
            backend,  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({HTTP_KEY: "app"}), **http),
        )
        client = TestClient(
            api, headers={"Authorization": f"Bearer {HTTP_KEY}"}, raise_server_exceptions=False
        )
        return client, backend

    return make
