"""The entity graph at the edges: `mnemoray graph`, GET /v1/graph/{app}/{user}, the client,
and a LanceDB store (which keeps no graph: every graph call refuses, naming why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli_app
from mnemoray.client import MnemorayAPIError, MnemorayClient
from mnemoray.errors import Unsupported
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.service.service import MemoryService
from tests.graph.test_integration import SESSIONS
from tests.support.service_backend import ServiceBackend

KEY = "graph-edges-user-key-0123456789"
OTHER = "graph-edges-other-key-012345678"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    service = MemoryService.open(tmp_path / "store", embedder=None, shards=2)
    for s in SESSIONS:
        service.ingest_session(s)
    service.close()
    return tmp_path / "store"


def graph_cli(store: Path, *args: str):
    return CliRunner().invoke(
        cli_app, ["graph", "--store", str(store), "--app", "app", "--user", "u1", *args]
    )


def test_the_cli_answers_with_facts_and_neighbours(store: Path) -> None:
    r = graph_cli(store, "Mel", "--depth", "1", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["entity"]["name"] == "Melanie" and "Mel" in out["entity"]["aliases"]
    names = {n["node_id"]: n["name"] for n in out["neighbours"]}
    now = [(f["type"], names[f["dst"]]) for f in out["facts"] if f["type"] == "lives_in"]
    assert now == [("lives_in", "Paris")]
    assert {n["kind"] for n in out["neighbours"]} == {"entity", "memory"}
    assert all(n["depth"] == 1 for n in out["neighbours"])

    past = json.loads(
        graph_cli(store, "Melanie", "--type", "lives_in", "--at", "2023-06-15", "--json").stdout
    )
    names = {n["node_id"]: n["name"] for n in past["neighbours"]}
    assert [names[f["dst"]] for f in past["facts"]] == ["Berlin"]

    table = graph_cli(store, "Melanie", "--depth", "1")
    assert table.exit_code == 0
    assert table.stdout.startswith("Melanie (person, ent-")
    assert "Melanie lives_in Paris" in table.stdout


def test_the_cli_exit_codes(store: Path) -> None:
    unknown = graph_cli(store, "Berlim")
    assert unknown.exit_code == 1
    assert unknown.output.strip().splitlines() == [
        "error: no entity 'Berlim' in the graph of app/u1; close: Berlin"
    ]
    for args, flag in (
        (["Mel", "--depth", "9"], "--depth"),
        (["Mel", "--type", "lives"], "--type"),
        (["Mel", "--at", "someday"], "--at"),
    ):
        bad = graph_cli(store, *args)
        assert bad.exit_code == 2, bad.output
        assert len(bad.output.strip().splitlines()) == 1
        assert bad.output.startswith(f"error: {flag}: ")
    missing = CliRunner().invoke(
        cli_app,
        ["graph", "--store", str(store.parent / "none"), "--app", "app", "--user", "u1", "Mel"],
    )
    assert missing.exit_code == 2 and "no memory store" in missing.output


@pytest.fixture
def served(store: Path):
    service = MemoryService.open(store, embedder=None)
    keys = ApiKeys.from_mapping({KEY: "app", OTHER: "other"})
    client = TestClient(
        build_api(
            ServiceBackend(service),  # type: ignore[arg-type]
            HttpConfig(keys=keys),
        )
    )
    yield client
    service.close()


def test_http_and_the_client(served: TestClient) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    r = served.get(
        "/v1/graph/app/u1",
        headers=headers,
        params={"entity": "Mel", "depth": 2, "type": ["lives_in", "mentions"]},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["entity"]["name"] == "Melanie" and body["types"] == ["lives_in", "mentions"]
    assert {n["relation"]["type"] for n in body["neighbours"]} <= {"lives_in", "mentions"}
    assert max(n["depth"] for n in body["neighbours"]) == 2

    assert served.get("/v1/graph/app/u1", params={"entity": "Mel"}).status_code == 401
    other = served.get(
        "/v1/graph/app/u1", params={"entity": "Mel"}, headers={"Authorization": f"Bearer {OTHER}"}
    )
    assert other.status_code == 403
    missing = served.get("/v1/graph/app/u1", headers=headers, params={"entity": "Bostn"})
    assert missing.status_code == 404 and "close: Boston" in missing.text
    for params in (
        {"entity": "Mel", "depth": 0},
        {"entity": "Mel", "type": "nope"},
        {"entity": "Mel", "at": "someday"},
        {},
    ):
        assert served.get("/v1/graph/app/u1", headers=headers, params=params).status_code == 422, (
            params
        )

    client = MnemorayClient(http=served, api_key=KEY)
    answer = client.graph("app", "u1", "Melanie", depth=1, types=["lives_in"], at="2023-06-15")
    names = {n.node_id: n.name for n in answer.neighbours}
    assert [names[f.dst] for f in answer.facts] == ["Berlin"]
    with pytest.raises(MnemorayAPIError) as err:
        client.graph("app", "u2", "Melanie")  # u2 never named her
    assert err.value.status == 404


def test_a_lancedb_store_refuses_graph_calls(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")
    location = f"lancedb://{tmp_path / 'ln'}"
    service = MemoryService.open(location, embedder=None)
    try:
        assert service.ingest_session(SESSIONS[0]).added  # memories still written
        with pytest.raises(Unsupported, match="entity graph needs a Parquet store"):
            service.neighbours("app", "u1", "Melanie")
        with pytest.raises(Unsupported):
            service.graph("app", "u1")
    finally:
        service.close()
    r = CliRunner().invoke(
        cli_app, ["graph", "--store", location, "--app", "app", "--user", "u1", "Melanie"]
    )
    assert r.exit_code == 2 and "needs a Parquet store" in r.output
