"""Profiles and the domain index at the edges: `mnemoray profile` / `mnemoray domain`,
GET /v1/profiles/{app}/{user} and GET /v1/domains/{app} (app-wide keys only), both
clients, and the compiler's user_profile processor."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli_app
from mnemoray.client import AsyncMnemorayClient, MnemorayAPIError, MnemorayClient
from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.errors import StoreCorrupt
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.profiles.reads import profile_over
from tests.support.factories import T0, session
from tests.support.profile_data import build_store
from tests.support.service_backend import ServiceBackend

KEY = "profiles-user-key-0123456789ab"
WIDE = "profiles-wide-key-0123456789ab"
OTHER = "profiles-other-key-0123456789a"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("edges"))


def cli(*args: str):
    return CliRunner().invoke(cli_app, list(args))


def test_the_cli(store: Path) -> None:
    r = cli("profile", "--store", str(store), "--app", "app", "--user", "alice", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["expertise"][0]["topic"] == "parrot" and out["sessions"] == 4
    table = cli("profile", "--store", str(store), "--app", "app", "--user", "alice")
    assert table.stdout.startswith("app/alice  store version ")
    assert "  expert           3        5  parrot (" in table.stdout
    assert "  divorce  [2023-11-14, session a1] No thanks." in table.stdout
    d = cli("domain", "--store", str(store), "--app", "app", "--json")
    assert d.exit_code == 0 and json.loads(d.stdout)["users"] == 2
    table = cli("domain", "--store", str(store), "--app", "app").stdout
    assert "cross-cutting: parrot (2 users), sourdough (2 users)" in table
    assert "weakly covered: starter" in table
    missing = cli("profile", "--store", str(store), "--app", "app", "--user", "carol")
    assert missing.exit_code == 1
    assert missing.output.strip() == "error: app/carol has no memories: nothing to profile"
    assert cli("domain", "--store", str(store), "--app", "none").exit_code == 1
    no_store = cli("domain", "--store", str(store.parent / "nope"), "--app", "app")
    assert no_store.exit_code == 2 and "no memory store" in no_store.output


class Backend(ServiceBackend):
    async def domain(self, app_name: str) -> dict[str, Any]:
        return await self.memory_op("domain", app_name, "")  # type: ignore[no-any-return]


@pytest.fixture
def served(store: Path):
    service = MemoryService.open(store, embedder=None)
    keys = ApiKeys.from_mapping(
        {KEY: "app", OTHER: "other", WIDE: {"apps": ["app"], "app_wide": True}}
    )
    api = build_api(Backend(service), HttpConfig(keys=keys))  # type: ignore[arg-type]
    yield TestClient(api), api
    service.close()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_http_routes_and_their_keys(served) -> None:
    http, _ = served
    r = http.get("/v1/profiles/app/alice", headers=bearer(KEY))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["expertise"][0]["topic"] == "parrot" and body["took_ms"] >= 0
    assert http.get("/v1/profiles/app/alice").status_code == 401
    assert http.get("/v1/profiles/app/alice", headers=bearer(OTHER)).status_code == 403
    assert http.get("/v1/profiles/app/carol", headers=bearer(KEY)).status_code == 404

    wide = http.get("/v1/domains/app", headers=bearer(WIDE))
    assert wide.status_code == 200, wide.text
    assert wide.json()["users"] == 2 and "alice" not in wide.text
    user_key = http.get("/v1/domains/app", headers=bearer(KEY))
    assert user_key.status_code == 403 and "app_wide" in user_key.text
    assert http.get("/v1/domains/other", headers=bearer(WIDE)).status_code == 403
    assert http.get("/v1/domains/app").status_code == 401


def test_both_clients(served) -> None:
    http, api = served
    client = MnemorayClient(http=http, api_key=KEY)
    p = client.profile("app", "alice")
    assert p.expertise[0].depth == "expert" and p.declined[0].topic == "divorce"
    with pytest.raises(MnemorayAPIError) as err:
        client.domain("app")
    assert err.value.status == 403
    d = MnemorayClient(http=http, api_key=WIDE).domain("app")
    assert d.cross_cutting[0].topic == "parrot" and d.periods[0].period == "2023-11"

    async def both() -> tuple[Any, Any]:
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as h:
            c = AsyncMnemorayClient(http=h, api_key=WIDE)
            return await c.profile("app", "bob"), await c.domain("app")

    bob, index = asyncio.run(both())
    assert bob.style.formality == "informal" and index.users == 2


def compile_for(service: MemoryService | None, agent: AgentSpec, source: Any = None):
    s = session("now", T0 + 300 * 86_400, ("u", "Any tips for my parrot?"), user="alice")
    services = Services(
        user_profile=source if source is not None else service.profile_source() if service else None
    )
    return Compiler.default().compile(s, agent, None, services)


def step(req, name: str = "user_profile"):
    return next(s for s in req.trace if s.name == name)


def test_the_compiler_processor_is_opt_in_and_hashed(store: Path, tmp_path: Path) -> None:
    service = MemoryService.open(store, embedder=None)
    try:
        off = compile_for(service, AgentSpec(name="helper", static_instruction="S."))
        assert "<user_profile>" not in off.system_instruction
        assert step(off).detail == {} and step(off).tokens_added == 0
        on = compile_for(
            service, AgentSpec(name="helper", static_instruction="S.", user_profile=True)
        )
        assert "<user_profile>" in on.system_instruction
        assert "Knows about: parrot (expert)" in on.system_instruction
        assert "Declined to talk about: divorce, ex-husband." in on.system_instruction
        detail = step(on).detail
        assert len(detail["profile_hash"]) == 64 and step(on).tokens_added > 0
        assert detail["expertise"][0] == "parrot"
        # A stable block: same profile, same hash; the prefix stays cacheable.
        again = compile_for(
            service, AgentSpec(name="helper", static_instruction="S.", user_profile=True)
        )
        assert step(again).detail["profile_hash"] == detail["profile_hash"]
        assert on.cacheable_prefix_tokens >= on.static_prefix_tokens + step(on).tokens_added
        # A new session changes it.
        service.ingest_session(
            session("a9", T0 + 400 * 86_400, ("u", "Let's not talk about politics."), user="alice")
        )
        moved = compile_for(service, AgentSpec(name="helper", user_profile=True))
        assert step(moved).detail["profile_hash"] != detail["profile_hash"]
        assert "politics" in moved.system_instruction
    finally:
        service.close()
    # A user with no memories yet: skipped; a failing store: degraded, compile goes on.
    empty = MemoryService.open(tmp_path / "empty", embedder=None)
    try:
        fresh = compile_for(empty, AgentSpec(name="helper", user_profile=True))
        assert step(fresh).detail == {"skipped": "no memories of this user yet"}
    finally:
        empty.close()

    def broken(app: str, user: str) -> None:
        raise StoreCorrupt("shard 1 is damaged")

    failed = compile_for(None, AgentSpec(name="helper", user_profile=True), broken)
    assert step(failed).error.error == "StoreCorrupt"
    assert "<user_profile>" not in failed.system_instruction


def test_a_servers_profile_source(store: Path) -> None:
    """What the ingress hands its compiles: the profile op of the user's replica."""
    service = MemoryService.open(store, embedder=None)
    try:
        ops = MemoryOps(service)
        source = profile_over(lambda op, app, user: ops.call(op, app, user, {}))
        assert source("app", "alice")["expertise"][0]["topic"] == "parrot"  # type: ignore[index]
        assert source("app", "carol") is None  # no memories yet: no block
    finally:
        service.close()
