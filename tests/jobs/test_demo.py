"""The end-to-end demo's compile over HTTP (mnemoray/jobs/demo.py), against the real API
over a real MemoryService (no Ray): what it prints of the compiled request."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mnemoray.client import MnemorayClient
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.jobs.demo import _compile_over_http
from mnemoray.memory.service.service import MemoryService
from tests.support.service_backend import ServiceBackend

KEY = "demo-test-key-0123456789"


def test_the_compile_shows_the_memory_block_before_the_message_and_the_opted_in_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = MemoryService.open(tmp_path / "store", embedder=None)
    api = build_api(
        ServiceBackend(service),  # type: ignore[arg-type]
        HttpConfig(keys=ApiKeys.from_mapping({KEY: "travel_app"})),
    )
    with MnemorayClient(api_key=KEY, http=TestClient(api)) as client:
        client.add_memories(
            "travel_app", "maya", ["Maya keeps a vegetarian diet at every restaurant."]
        )
        _compile_over_http(client)
    service.close()
    out = capsys.readouterr().out
    system, rest = out.split("--- memory block, just before the new message ---\n")
    assert "<memory>" not in system and "vegetarian diet" in rest.split("\n--- ")[0]
    assert "tools: load_memory;" in rest
