"""Memory scopes over the edges: the HTTP API (build_api over a real MemoryService, no
Ray), the typed client, the compiler's memory preload, and the MCP server through the
SDK's own client (in process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from mnemoray.client import ForbiddenAPIError, InvalidInputAPIError, MnemorayClient
from mnemoray.embedders import open_embedder
from mnemoray.errors import InvalidInput
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.mcp import Tenant, build_server
from mnemoray.mcp.local import LocalBackend
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.scopes import ScopePolicy
from mnemoray.sessions.events import user_message
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.summarizers.extractive import ExtractiveSummarizer
from tests.support.factories import FLYING, parrot
from tests.support.service_backend import ServiceBackend

SHOP_KEY, SUPPORT_KEY = "shop-key-0123456789abcdef", "support-key-0123456789abcdef"
BOTH = {"shop": {"share_with": ["support"]}, "support": {"read_from": ["shop"]}}


@pytest.fixture(scope="module")
def embedder():
    return open_embedder("default")


def make_service(root: Path, embedder, scopes=BOTH) -> MemoryService:
    service = MemoryService(MemoryStore(root), embedder, ExtractiveSummarizer())
    service.scopes = ScopePolicy.of(scopes)
    return service


@pytest.fixture
def service(tmp_path: Path, embedder) -> Iterator[MemoryService]:
    svc = make_service(tmp_path / "store", embedder)
    yield svc
    svc.close()


def api_client(service: MemoryService, key: str) -> MnemorayClient:
    backend = ServiceBackend(service)
    keys = ApiKeys.from_mapping({SHOP_KEY: "shop", SUPPORT_KEY: "support"})
    return MnemorayClient(
        api_key=key,
        http=TestClient(
            build_api(
                backend,  # type: ignore[arg-type]
                HttpConfig(keys=keys),
            )
        ),
    )


def test_agent_only_memories_over_http(service: MemoryService) -> None:
    with api_client(service, SHOP_KEY) as shop:
        shop.add_memories("shop", "ana", ["Ana's card ends in 4242"], agent_name="billing")
        shop.add_memories(
            "shop",
            "ana",
            ["Ana likes green tea", {"text": "Ana asked for gift wrap", "agent_name": "packer"}],
        )
        q = "what do we know about Ana's card, tea and gift wrap"
        seen = {
            m.text: m.agent_name
            for m in shop.recall("shop", "ana", q, 10, agent_name="billing").memories
        }
        assert seen == {"Ana's card ends in 4242": "billing", "Ana likes green tea": None}
        assert [m.text for m in shop.recall("shop", "ana", q, 10).memories] == [
            "Ana likes green tea"
        ]
        got = shop.search("shop", "ana", q, 10, agent_name="packer").memories
        assert {m.text for m in got} == {"Ana likes green tea", "Ana asked for gift wrap"}
        assert all(m.app_name == "shop" for m in got)
        listed = {m.text: m.agent_name for m in shop.list_memories("shop", "ana").memories}
        assert listed["Ana's card ends in 4242"] == "billing"
        assert listed["Ana likes green tea"] == ""


@pytest.mark.parametrize(
    ("method", "path", "payload"),
    [
        (
            "post",
            "/v1/recall",
            {"app_name": "shop", "user_id": "ana", "query": "x", "agent_name": "has space"},
        ),
        (
            "get",
            "/v1/recall",
            {"app_name": "shop", "user_id": "ana", "query": "x", "agent_name": "9lives"},
        ),
        (
            "post",
            "/v1/memories",
            {
                "app_name": "shop",
                "user_id": "ana",
                "agent_name": "a/b",
                "memories": [{"text": "x"}],
            },
        ),
        (
            "post",
            "/v1/memories",
            {
                "app_name": "shop",
                "user_id": "ana",
                "memories": [{"text": "x", "agent_name": "tab\there"}],
            },
        ),
    ],
)
def test_a_bad_agent_name_is_one_line_422(service: MemoryService, method, path, payload) -> None:
    http = TestClient(
        build_api(
            ServiceBackend(service),  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({SHOP_KEY: "shop"})),
        ),
        headers={"Authorization": f"Bearer {SHOP_KEY}"},
    )
    r = http.get(path, params=payload) if method == "get" else http.post(path, json=payload)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert "agent_name" in err["field"] and "is not an agent name" in err["message"]
    assert "\n" not in err["message"]


def test_a_queued_session_takes_no_agent_name(service: MemoryService) -> None:
    with api_client(service, SHOP_KEY) as shop, pytest.raises(InvalidInputAPIError) as err:
        shop.add_session(parrot(app="shop", user="ana").to_dict(), wait=False, agent_name="vet")
    assert err.value.field == "agent_name" and "wait=false" in str(err.value)


def test_cross_app_sharing_over_http(tmp_path: Path, embedder) -> None:
    service = make_service(tmp_path / "store", embedder)
    with api_client(service, SHOP_KEY) as shop, api_client(service, SUPPORT_KEY) as support:
        shop.add_session(parrot(app="shop", user="ana").to_dict())
        shop.add_memories("shop", "ana", ["Ana's parrot cage order is late"], agent_name="sales")
        shop.add_memories("shop", "bo", ["Bo owns a parrot named Kiwi"])
        support.add_memories("support", "ana", ["Ana asked for a refund of a bird toy"])
        got = support.recall("support", "ana", FLYING, 10).memories
        assert {m.app_name for m in got} == {"shop", "support"}  # one list, both owners
        assert got[0].app_name == "shop" and "parrot" in got[0].text.lower()
        assert all("Kiwi" not in m.text and "late" not in m.text for m in got)
        # The sharing app reads only its own; the reader's key never reaches shop itself.
        assert {m.app_name for m in shop.recall("shop", "ana", FLYING, 10).memories} == {"shop"}
        with pytest.raises(ForbiddenAPIError):
            support.recall("shop", "ana", FLYING, 3)
        # Forget stays with the owner: 403 naming it, and the memory stays.
        shared = next(m for m in got if m.app_name == "shop")
        with pytest.raises(ForbiddenAPIError) as err:
            support.forget_memory("support", "ana", shared.memory_id)
        assert "belongs to app 'shop'" in str(err.value)
        assert err.value.field == "memory_id"
        with pytest.raises(ForbiddenAPIError, match="edit it through app 'shop'"):
            support.edit_memory("support", "ana", shared.memory_id, "something else")
        assert shared.memory_id in {
            m.memory_id for m in support.recall("support", "ana", FLYING, 10).memories
        }
        assert shop.forget_memory("shop", "ana", shared.memory_id) == 1
        assert shared.memory_id not in {
            m.memory_id for m in support.recall("support", "ana", FLYING, 10).memories
        }
    service.close()


def test_one_sided_config_shares_nothing_over_http(tmp_path: Path, embedder) -> None:
    service = make_service(
        tmp_path / "store", embedder, {"support": {"read_from": ["shop"]}}
    )  # shop never agreed
    with api_client(service, SHOP_KEY) as shop, api_client(service, SUPPORT_KEY) as support:
        shop.add_session(parrot(app="shop", user="ana").to_dict())
        support.add_memories("support", "ana", ["Ana asked for a refund of a bird toy"])
        got = support.recall("support", "ana", FLYING, 10).memories
        assert {m.app_name for m in got} == {"support"}
        shop_id = shop.list_memories("shop", "ana").memories[0].memory_id
        with pytest.raises(Exception) as err:  # unknown here: nothing says shop holds it
            support.forget_memory("support", "ana", shop_id)
        assert getattr(err.value, "status", None) == 404
    service.close()


def test_compile_preloads_the_agents_view(service: MemoryService) -> None:
    with api_client(service, SHOP_KEY) as shop:
        shop.add_memories("shop", "ana", ["Ana's parrot is called Pico"], agent_name="vet")
        shop.add_memories("shop", "ana", ["Ana lives in Lyon"])
        shop.create_session("shop", "ana", "s1")
        shop.append_events(
            "shop", "ana", "s1", [user_message("Tell me about Pico the parrot and Lyon")]
        )

        def memories(out: Any) -> str:
            """The memory block (a content just before the turn being answered)."""
            return next((c.text for c in out.contents if c.text.startswith("<memory>")), "")

        def block(agent: str) -> str:
            return memories(
                shop.compile(
                    "shop", "ana", "s1", {"name": agent, "memory_preload": True, "preload_top_k": 5}
                )
            )

        assert "Pico" in block("vet") and "Lyon" in block("vet")
        assert "Pico" not in block("groomer") and "Lyon" in block("groomer")
        # A name that cannot own agent-only memories compiles, seeing the shared ones.
        assert "Pico" not in block("front desk") and "Lyon" in block("front desk")
        # memory_agent decouples the view from the name: "" = the shared memories only.
        agent = {"name": "vet", "memory_preload": True, "preload_top_k": 5}
        shared = memories(shop.compile("shop", "ana", "s1", agent, memory_agent=""))
        assert "Pico" not in shared and "Lyon" in shared
        groomer_as_vet = memories(
            shop.compile("shop", "ana", "s1", {**agent, "name": "groomer"}, memory_agent="vet")
        )
        assert "Pico" in groomer_as_vet
        with pytest.raises(InvalidInputAPIError, match="memory_agent"):
            shop.compile("shop", "ana", "s1", agent, memory_agent="front desk")


# -- MCP ------------------------------------------------------------------------------------
def mcp_call(
    service: MemoryService, tenant: Tenant, calls: list[tuple[str, dict]], tmp_path: Path
) -> list[tuple[bool, object]]:
    """Each call through the SDK's client: a tool (is_error, answer), or a resource when
    the name is a URI (False, its JSON)."""
    backend = LocalBackend(service, tmp_path / "sessions.db", tmp_path / "artifacts")
    server = build_server(backend, tenant)

    async def main() -> list[tuple[bool, object]]:
        out: list[tuple[bool, object]] = []
        async with Client(server) as client:
            for tool, args in calls:
                if tool.startswith("mnemoray://"):
                    read = await client.read_resource(tool)
                    out.append((False, json.loads(read.contents[0].text)))
                    continue
                result = await client.call_tool(tool, args)
                text = result.content[0].text
                out.append((result.is_error, text if result.is_error else json.loads(text)))
        return out

    return anyio.run(main)


def test_mcp_recalls_as_its_agent(service: MemoryService, tmp_path: Path) -> None:
    service.add_session(parrot(app="shop", user="ana"))
    vet = Tenant("support", "ana", agent_name="vet")
    (e1, added), (e2, recalled), (e3, err) = mcp_call(
        service,
        vet,
        [
            ("remember", {"memories": ["Ana's parrot needs a beak trim"], "agent_only": True}),
            ("recall", {"query": "parrot beak trim", "top_k": 10}),
            ("remember", {"memories": [{"text": "x", "agent_name": "other"}]}),
        ],
        tmp_path,
    )
    assert not e1 and added["added"] == 1
    assert not e2
    owners = {(m["app_name"], m.get("agent_name")) for m in recalled["memories"]}
    assert ("support", "vet") in owners and ("shop", None) in owners
    assert e3 and "agent_name" in str(err) and "\n" not in str(err)
    # Another agent of the app (or none) does not see the vet's memory.
    for tenant in (Tenant("support", "ana", agent_name="desk"), Tenant("support", "ana")):
        [(e, out), (_, listed), (_, profile)] = mcp_call(
            service,
            tenant,
            [
                ("recall", {"query": "parrot beak trim"}),
                (f"{tenant.uri}/memories", {}),
                (f"{tenant.uri}/profile", {}),
            ],
            tmp_path,
        )
        assert not e and all("beak trim" not in m["text"] for m in out["memories"])
        assert all("beak trim" not in m["text"] for m in listed["memories"])
        assert "beak trim" not in json.dumps(profile)
    # compile_context preloads the server's agent's view, whatever agent.name says.
    service.add_memories(
        [
            Memory(
                "support",
                "ana",
                "online",
                "fact",
                "Ana's parrot is allergic to sunflower seeds",
                agent_name="vet",
            )
        ]
    )
    compile_args = {
        "session_id": "c1",
        "new_message": "what is the parrot allergic to",
        "agent": {"name": "vet", "memory_preload": True, "preload_top_k": 10},
    }
    sessions = SQLiteSessionStore(tmp_path / "sessions.db")  # the one mcp_call's server reads
    sessions.create_session("support", "ana", "c1")
    sessions.close()
    for tenant, sees in (
        (vet, True),
        (Tenant("support", "ana", agent_name="desk"), False),
        (Tenant("support", "ana"), False),
    ):
        [(e, out)] = mcp_call(service, tenant, [("compile_context", compile_args)], tmp_path)
        assert not e and ("sunflower" in json.dumps(out)) is sees, tenant
    [(_, listed)] = mcp_call(service, vet, [(f"{vet.uri}/memories", {})], tmp_path)
    assert [m["agent_name"] for m in listed["memories"]] == ["vet", "vet"]  # + the allergy note
    [(e, msg)] = mcp_call(
        service,
        Tenant("support", "ana"),
        [("remember", {"memories": ["y"], "agent_only": True})],
        tmp_path,
    )
    assert e and "agent_only" in str(msg)
    with pytest.raises(InvalidInput):
        Tenant("support", "ana", agent_name="no spaces")


def test_the_serve_settings_carry_the_scopes_group(tmp_path: Path) -> None:
    from mnemoray.settings.serve import SettingsError, load_settings

    s = load_settings(
        {"store": str(tmp_path), "scopes.apps.shop.share_with": '["support"]'},
        env={
            "MNEMORAY_SCOPES__APPS__SUPPORT__READ_FROM": '["shop"]',
            "MNEMORAY_SCOPES__MEMORY_SCOPE": "agent",
        },
    )
    assert s.scopes.policy.readable_apps("support") == ("shop",)
    assert s.scopes.policy.memory_scope("anything") == "agent"
    with pytest.raises(SettingsError) as err:
        load_settings({"store": str(tmp_path), "scopes.apps.shop.shared_with": '["x"]'}, env={})
    assert err.value.field == "scopes.apps.shop.shared_with"
