"""The memory inspector's API over real HTTP: ``build_api(LocalBackend)`` over a
real store built by ``ui_fixtures`` (no Ray), and the ``mnemoray ui`` command itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mnemoray.client import MnemorayClient
from mnemoray.compiler.replay import session_at
from mnemoray.errors import NotFound, Unsupported
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.http.local_backend import LocalBackend
from mnemoray.http.models import local_summarizer
from mnemoray.http.parts import build_parts
from mnemoray.memory.records.kinds import MEMORY_KINDS
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.settings.serve import parse_settings
from tests.support.ui_fixtures import (
    ANA,
    ANA_PLANS,
    ANA_SESSION,
    APP,
    BEN,
    BEN_SESSION,
    T_PLANS,
    UiStore,
    build_ui_store,
    damage_shard_of,
)

KEY_ANA = "ui-test-user-key-0123456789"  # demo_app, user-facing
KEY_WIDE = "ui-test-wide-key-0123456789"  # demo_app, app_wide
KEY_OTHER = "ui-test-other-key-0123456789"  # another app only
KEYS = {KEY_ANA: APP, KEY_WIDE: {"apps": [APP], "app_wide": True}, KEY_OTHER: "other_app"}
LOCAL = ("127.0.0.1", 50000)  # an open server answers loopback clients only
# ... addressed to a loopback name (TestClient's default Host, "testserver", is not one).
LOCAL_URL = "http://127.0.0.1:8765"
AGENT = {"name": "parrot_agent", "instruction": "You help Ana care for her parrot."}


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UiStore, LocalBackend]]:
    store = build_ui_store(tmp_path_factory.mktemp("ui") / "store")
    backend = LocalBackend.open(str(store.store))
    yield store, backend
    backend.close()


def local_http(backend: LocalBackend, **options: Any) -> TestClient:
    """An open server's client: on the loopback interface, addressed to 127.0.0.1."""
    return TestClient(
        build_api(backend),
        client=LOCAL,
        base_url=LOCAL_URL,  # type: ignore[arg-type]
        **options,
    )


@pytest.fixture(scope="module")
def open_http(ui: tuple[UiStore, LocalBackend]) -> TestClient:
    return local_http(ui[1])


@pytest.fixture(scope="module")
def keyed(ui: tuple[UiStore, LocalBackend]) -> TestClient:
    return TestClient(build_api(ui[1], HttpConfig(keys=ApiKeys.from_mapping(KEYS))))  # type: ignore[arg-type]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def error_of(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    return resp.json()["error"]  # type: ignore[no-any-return]


def memories(
    client: TestClient, user: str = ANA, key: str | None = None, **filters: Any
) -> list[dict[str, Any]]:
    r = client.get(
        "/v1/memories",
        params={"app_name": APP, "user_id": user, **filters},
        headers=bearer(key) if key else None,
    )
    assert r.status_code == 200, r.text
    return r.json()["memories"]  # type: ignore[no-any-return]


# -- GET /v1/apps ------------------------------------------------------------------------
def test_apps_lists_users_only_for_an_open_server_or_an_app_wide_key(
    open_http: TestClient, keyed: TestClient
) -> None:
    expected_users = [
        {"user_id": ANA, "memories": len(memories(open_http, ANA))},
        {"user_id": BEN, "memories": len(memories(open_http, BEN))},
    ]
    assert all(u["memories"] > 0 for u in expected_users)
    total = sum(u["memories"] for u in expected_users)
    opened = open_http.get("/v1/apps").json()
    assert opened == {
        "apps": [
            {"app_name": APP, "memories": total, "users": expected_users, "users_truncated": False}
        ],
        "skipped_shards": [],
    }
    wide = keyed.get("/v1/apps", headers=bearer(KEY_WIDE)).json()
    assert wide == opened
    # A user-facing key sees its app but not who else uses it: the page asks for a user id.
    assert keyed.get("/v1/apps", headers=bearer(KEY_ANA)).json() == {
        "apps": [{"app_name": APP, "memories": total, "users": None, "users_truncated": False}],
        "skipped_shards": [],
    }
    # Another tenant's key: not even the app's name.
    assert keyed.get("/v1/apps", headers=bearer(KEY_OTHER)).json() == {
        "apps": [],
        "skipped_shards": [],
    }
    assert error_of(keyed.get("/v1/apps"), 401)["field"] == "authorization"


def test_an_open_server_refuses_remote_clients(ui: tuple[UiStore, LocalBackend]) -> None:
    remote = TestClient(build_api(ui[1]), base_url=LOCAL_URL)  # type: ignore[arg-type]  # client "testclient"
    for path in ("/v1/apps", "/v1/store"):
        assert error_of(remote.get(path), 403)["message"].endswith("other hosts")


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example:8765",
        "attacker.example",
        "127.0.0.1.attacker.example",
        "localhost.example:80",
        "",
    ],
)
def test_an_open_server_refuses_other_host_names(
    ui: tuple[UiStore, LocalBackend], host: str
) -> None:
    """DNS rebinding: a page at attacker.example re-pointed at 127.0.0.1 reaches the open
    server from the loopback interface, under its own name: refused, as JSON."""
    local = TestClient(build_api(ui[1]), client=LOCAL, headers={"host": host})  # type: ignore[arg-type]
    for method, path in (
        ("GET", "/v1/apps"),
        ("GET", "/v1/store"),
        ("GET", "/ui/"),
        ("DELETE", f"/v1/users/{APP}/nobody/memories"),  # no one to lose
        ("GET", "/openapi.json"),
        ("GET", "/metrics"),
    ):
        err = error_of(local.request(method, path), 403)
        assert err["field"] == "host" and f"Host header {host!r}" in err["message"]
        assert "\n" not in err["message"] and err["request_id"]
    assert memories(local_http(ui[1]), ANA)
    # A health probe names the machine, not localhost: answered.
    assert local.get("/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]:8765", "127.0.0.2"]
)
def test_an_open_server_answers_loopback_host_names(
    ui: tuple[UiStore, LocalBackend], host: str
) -> None:
    local = TestClient(build_api(ui[1]), client=LOCAL, headers={"host": host})  # type: ignore[arg-type]
    assert local.get("/v1/apps").status_code == 200


def test_host_names_are_checked_only_on_a_loopback_only_open_server(
    ui: tuple[UiStore, LocalBackend], keyed: TestClient
) -> None:
    # Keys: a key is what a rebinding page lacks. allow_remote_without_keys: the operator
    # chose remote access under any name.
    other = {"host": "inspector.example.org"}
    assert keyed.get("/v1/apps", headers={**bearer(KEY_WIDE), **other}).status_code == 200
    remote = TestClient(
        build_api(ui[1], HttpConfig(allow_remote_without_keys=True)),  # type: ignore[arg-type]
        headers=other,
    )
    assert remote.get("/v1/apps").status_code == 200


def test_a_damaged_shard_leaves_apps_and_store_answering(tmp_path: Path) -> None:
    """One shard unreadable: /v1/apps lists the other shards' users and names the skipped
    shard; /v1/store answers the other shards' figures (partial) and the doctor's
    findings. Neither is a 500."""
    store = build_ui_store(tmp_path / "store")
    healthy = LocalBackend.open(str(store.store))
    try:
        http = local_http(healthy)
        ben_count = len(memories(http, BEN))
        before = http.get("/v1/store").json()["stats"]
        assert before["partial"] is False and before["damaged_shards"] == []
    finally:
        healthy.close()
    shard = damage_shard_of(store.store, ANA)
    backend = LocalBackend.open(str(store.store))
    try:
        http = local_http(backend, raise_server_exceptions=False)
        apps = http.get("/v1/apps")
        assert apps.status_code == 200, apps.text
        assert apps.json() == {
            "apps": [
                {
                    "app_name": APP,
                    "memories": ben_count,
                    "users": [{"user_id": BEN, "memories": ben_count}],
                    "users_truncated": False,
                }
            ],
            "skipped_shards": [shard],
        }
        report = http.get("/v1/store")
        assert report.status_code == 200, report.text
        stats, doctor = report.json()["stats"], report.json()["doctor"]
        assert stats["partial"] is True and stats["damaged_shards"] == [shard]
        assert stats["memories"] == ben_count and stats["users"] == 1
        assert stats["apps"] == {APP: ben_count} and stats["shards"] == before["shards"]
        assert doctor["checked"] and not doctor["healthy"] and doctor["problems"]
        # Ana's own reads still refuse: no partial answer for a tenant of that shard.
        assert http.get("/v1/memories", params={"app_name": APP, "user_id": ANA}).status_code == 500
    finally:
        backend.close()


def test_apps_caps_the_users_listed_per_app(tmp_path: Path) -> None:
    """Users by name, the first MAX_USERS of each app; the memories count all of them."""
    from mnemoray.http import inspector
    from mnemoray.memory.service.service import MemoryService

    sessions = SQLiteSessionStore(tmp_path / "sessions.db")
    try:
        for i in range(7):
            sessions.create_session("app", f"user-{i}", "s1")
            sessions.create_session("app", f"user-{i}", "s2")
        sessions.create_session("other", "zed", "s1")
        service = MemoryService.open(tmp_path / "store", embedder=None)
        try:
            from mnemoray.memory.records.record import Memory

            service.add_memories(
                [
                    Memory("app", "user-9", "s9", "fact", "likes tea"),
                    Memory("app", "user-0", "s1", "fact", "likes coffee"),
                ]
            )
            snap = service.snapshot()
        finally:
            service.close()
        assert sessions.app_users(["app"], 3) == {"app": ["user-0", "user-1", "user-2"]}
        assert sessions.app_users() == {"app": [f"user-{i}" for i in range(7)], "other": ["zed"]}
        got = inspector.tenants(snap, sessions, ["app"], max_users=3)
        assert got == {
            "apps": [
                {
                    "app_name": "app",
                    "memories": 2,
                    "users": [
                        {"user_id": "user-0", "memories": 1},
                        {"user_id": "user-1", "memories": 0},
                        {"user_id": "user-2", "memories": 0},
                    ],
                    "users_truncated": True,
                }
            ],
            "skipped_shards": [],
        }
        whole = inspector.tenants(snap, sessions, None, max_users=8)["apps"]
        assert [a["app_name"] for a in whole] == ["app", "other"]
        assert [u["user_id"] for u in whole[0]["users"]] == [
            *(f"user-{i}" for i in range(7)),
            "user-9",
        ]
        assert not whole[0]["users_truncated"]
    finally:
        sessions.close()


def test_live_per_tenant_counts_each_range_by_binary_search() -> None:
    import numpy as np

    from mnemoray.memory.store.ops.stats import live_per_tenant

    rng = np.random.default_rng(7)
    bounds = np.sort(rng.choice(5000, size=401, replace=False))
    ranges = {("app", f"u{i}"): (int(bounds[i]), int(bounds[i + 1])) for i in range(400)}
    ranges[("app", "empty")] = (10, 10)
    live = np.sort(rng.choice(5000, size=1200, replace=False))
    brute = {t: int(((live >= a) & (live < b)).sum()) for t, (a, b) in ranges.items()}
    assert live_per_tenant(ranges, live) == {t: n for t, n in brute.items() if n}
    assert live_per_tenant(ranges, live[:0]) == {} and live_per_tenant({}, live) == {}
    # A segment of 100,000 users and 1,000,000 live rows: a pass over every live row per
    # user would take minutes; binary searches take milliseconds.
    many = {("app", f"u{i}"): (i * 10, i * 10 + 10) for i in range(100_000)}
    start = time.perf_counter()
    counts = live_per_tenant(many, np.arange(1_000_000))
    assert len(counts) == 100_000 and set(counts.values()) == {10}
    assert time.perf_counter() - start < 10


# -- GET /v1/store -----------------------------------------------------------------------
def test_store_report_needs_an_open_server_or_an_app_wide_key(
    open_http: TestClient, keyed: TestClient
) -> None:
    report = open_http.get("/v1/store").json()
    stats = report["stats"]
    assert stats["memories"] == sum(stats["kinds"].values()) > 0
    assert stats["apps"] == {APP: stats["memories"]} and stats["users"] == 2
    assert stats["backend"] == "parquet" and stats["shards"] >= 1
    assert report["doctor"] == {"healthy": True, "problems": [], "checked": True, "note": None}
    assert report["runs"] == []  # no batch run wrote this store
    assert keyed.get("/v1/store", headers=bearer(KEY_WIDE)).json() == report
    for key in (KEY_ANA, KEY_OTHER):
        err = error_of(keyed.get("/v1/store", headers=bearer(key)), 403)
        assert err["field"] == "authorization" and "app_wide" in err["message"]


def test_store_report_lists_the_last_runs_newest_first(tmp_path: Path) -> None:
    from mnemoray.http.inspector import recent_runs
    from mnemoray.memory.store.runs import read_run_reports, write_run_report

    store = build_ui_store(tmp_path / "store")
    backend = LocalBackend.open(str(store.store))
    try:
        for i in range(12):
            write_run_report(
                store.store,
                f"run-{i:02d}",
                {
                    "run_id": f"run-{i:02d}",
                    "kind": "backfill",
                    "status": "done",
                    "started_at": 1000.0 + i,
                    "finished_at": 1010.0 + i,
                    "config": {"x": 1},
                    "throughput": {"sessions_per_s": 2.5},
                    "stage_seconds": {"embed": 1.0},
                },
            )
        runs = local_http(backend).get("/v1/store").json()["runs"]
    finally:
        backend.close()
    assert [r["run_id"] for r in runs] == [f"run-{i:02d}" for i in range(11, 1, -1)]
    assert runs[0]["throughput"] == {"sessions_per_s": 2.5} and "config" not in runs[0]
    # The summary fields only (the HTTP model shows those a report lacks as null).
    assert recent_runs(read_run_reports(backend.parts.store.root), 1) == [
        {k: v for k, v in runs[0].items() if v is not None}
    ]


# -- GET /v1/memories filters ---------------------------------------------------------------
def test_memory_list_filters_by_kind_session_and_event_time(open_http: TestClient) -> None:
    everything = memories(open_http)
    kinds = {m["kind"] for m in everything}
    assert len(kinds) > 1
    for kind in kinds:
        got = memories(open_http, kind=kind)
        assert got == [m for m in everything if m["kind"] == kind]
    parrot = memories(open_http, session_id=ANA_SESSION)
    assert parrot and all(m["session_id"] == ANA_SESSION for m in parrot)
    assert any("Kiwi" in m["text"] for m in parrot)
    plans = memories(open_http, since=T_PLANS - 1)
    assert plans and {m["session_id"] for m in plans} == {ANA_PLANS}
    early = memories(open_http, until=T_PLANS - 1)
    assert sorted(m["memory_id"] for m in early + plans) == sorted(
        m["memory_id"] for m in everything
    )
    both = memories(open_http, session_id=ANA_SESSION, kind="chunk")
    assert both and all(m["kind"] == "chunk" and m["session_id"] == ANA_SESSION for m in both)
    assert memories(open_http, session_id="no-such-session") == []


def test_filtered_pages_follow_the_cursor(open_http: TestClient) -> None:
    want = memories(open_http, session_id=ANA_SESSION)
    got, cursor = [], None
    while True:
        params = {
            "app_name": APP,
            "user_id": ANA,
            "session_id": ANA_SESSION,
            "limit": 2,
            **({"cursor": cursor} if cursor else {}),
        }
        page = open_http.get("/v1/memories", params=params).json()
        got += page["memories"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert got == want


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"kind": "poem"}, "kind"),
        ({"since": "yesterday"}, "since"),
        ({"until": "nan"}, "until"),
        ({"since": 200.0, "until": 100.0}, "until"),
        ({"session_id": ""}, "session_id"),
    ],
)
def test_bad_list_filters_are_422_naming_the_field(
    open_http: TestClient, params: dict[str, Any], field: str
) -> None:
    r = open_http.get("/v1/memories", params={"app_name": APP, "user_id": ANA, **params})
    err = error_of(r, 422)
    assert err["field"] == field and "\n" not in err["message"]


def test_kinds_in_the_schema_are_the_stores() -> None:
    from mnemoray.schemas.common import Kind

    assert set(Kind.__args__) == set(MEMORY_KINDS)  # type: ignore[attr-defined]


# -- explain on recall ------------------------------------------------------------------------
def test_explain_contributions_add_up_to_the_score(open_http: TestClient) -> None:
    body = {
        "app_name": APP,
        "user_id": ANA,
        "query": "what is my parrot Kiwi eating",
        "top_k": 5,
        "explain": True,
    }
    got = open_http.post("/v1/recall", json=body).json()["memories"]
    assert got and any("Kiwi" in m["text"] for m in got)
    for m in got:
        parts = m["contributions"]
        assert parts and set(parts) <= {
            "dense",
            "bm25",
            "entity",
            "graph",
            "time",
            "recency",
            "offset",
        }
        assert m["score"] == pytest.approx(1.0 + sum(parts.values()), abs=1e-9)
        # Every contribution is of a signal the result reports.
        assert all(name in m["signals"] for name in parts if name != "offset")
    plain = open_http.post("/v1/recall", json={**body, "explain": False}).json()["memories"]
    assert [m["memory_id"] for m in plain] == [m["memory_id"] for m in got]
    assert all("contributions" not in m for m in plain)
    search = open_http.get(
        "/v1/recall",
        params={"app_name": APP, "user_id": ANA, "query": body["query"], "explain": "true"},
    )
    assert [m["contributions"] for m in search.json()["memories"]] == [
        m["contributions"] for m in got
    ]


# -- at_event_id on compile --------------------------------------------------------------------
def test_compile_at_each_user_turn(ui: tuple[UiStore, LocalBackend], open_http: TestClient) -> None:
    store, _ = ui
    body = {"app_name": APP, "user_id": ANA, "session_id": ANA_SESSION, "agent": AGENT}
    now = open_http.post("/v1/context:compile", json=body).json()
    turns = [
        open_http.post("/v1/context:compile", json={**body, "at_event_id": e}).json()
        for e in store.user_turn_ids
    ]
    tokens = [t["total_tokens"] for t in turns]
    assert tokens == sorted(tokens) and tokens[0] < tokens[-1] <= now["total_tokens"]
    assert all(t["prefix_hash"] and t["trace"] for t in turns)
    # The last event replayed is the session as it is.
    last = open_http.post(
        "/v1/context:compile", json={**body, "at_event_id": store.event_ids[-1]}
    ).json()
    assert last["contents"] == now["contents"]
    err = error_of(
        open_http.post("/v1/context:compile", json={**body, "at_event_id": "no-such-event"}), 404
    )
    assert err["field"] == "at_event_id" and "no-such-event" in err["message"]
    err = error_of(open_http.post("/v1/context:compile", json={**body, "at_event_id": ""}), 422)
    assert err["field"] == "at_event_id"


def test_session_at_rewinds_the_state(ui: tuple[UiStore, LocalBackend]) -> None:
    store, _ = ui
    sessions = SQLiteSessionStore(store.sessions_db)
    try:
        session = sessions.get_session(APP, ANA, ANA_SESSION)
    finally:
        sessions.close()
    first = session_at(session, store.user_turn_ids[0])
    assert [e.id for e in first.events] == store.event_ids[:1]
    assert first.state["user:pet"] == "Kiwi the parrot"  # set by that event
    assert "mood" not in first.state and "app:last_topic" not in first.state  # set later
    assert session.state["mood"] == "happy" and not first.ended
    second = session_at(session, store.user_turn_ids[1])
    assert second.state["mood"] == "happy" and "app:last_topic" not in second.state
    with pytest.raises(NotFound):
        session_at(session, "nope")


# -- tenant isolation across the new endpoints -------------------------------------------------
def test_no_new_endpoint_shows_another_users_or_apps_memories(
    ui: tuple[UiStore, LocalBackend], keyed: TestClient
) -> None:
    store, _ = ui
    ana_ids = set(store.memory_ids[ANA])
    # Ben, through the filters: never Ana's rows, even naming her session.
    for filters in ({}, {"session_id": ANA_SESSION}, {"since": 0.0}, {"kind": "chunk"}):
        got = memories(keyed, BEN, KEY_ANA, **filters)
        assert not ana_ids & {m["memory_id"] for m in got}
    assert memories(keyed, BEN, KEY_ANA, session_id=ANA_SESSION) == []
    assert {m["session_id"] for m in memories(keyed, BEN, KEY_ANA)} == {BEN_SESSION}
    # Ben's recall of Ana's parrot, explained: only Ben's memories.
    got = keyed.post(
        "/v1/recall",
        headers=bearer(KEY_ANA),
        json={"app_name": APP, "user_id": BEN, "query": "parrot Kiwi", "explain": True},
    ).json()
    assert not ana_ids & {m["memory_id"] for m in got["memories"]}
    assert all("Kiwi" not in m["text"] for m in got["memories"])
    # Ben compiling Ana's session, or his own at one of her events: not found.
    compile_ = {"app_name": APP, "user_id": BEN, "agent": AGENT}
    error_of(
        keyed.post(
            "/v1/context:compile",
            headers=bearer(KEY_ANA),
            json={**compile_, "session_id": ANA_SESSION},
        ),
        404,
    )
    err = error_of(
        keyed.post(
            "/v1/context:compile",
            headers=bearer(KEY_ANA),
            json={**compile_, "session_id": BEN_SESSION, "at_event_id": store.event_ids[0]},
        ),
        404,
    )
    assert err["field"] == "at_event_id"
    # Another app's key: refused on every new input, before anything is read.
    for resp in (
        keyed.get(
            "/v1/memories",
            headers=bearer(KEY_OTHER),
            params={"app_name": APP, "user_id": ANA, "kind": "chunk"},
        ),
        keyed.post(
            "/v1/recall",
            headers=bearer(KEY_OTHER),
            json={"app_name": APP, "user_id": ANA, "query": "Kiwi", "explain": True},
        ),
        keyed.post(
            "/v1/context:compile",
            headers=bearer(KEY_OTHER),
            json={
                "app_name": APP,
                "user_id": ANA,
                "session_id": ANA_SESSION,
                "agent": AGENT,
                "at_event_id": store.event_ids[0],
            },
        ),
    ):
        assert error_of(resp, 403)["field"] == "app_name"


# -- the client --------------------------------------------------------------------------------
def test_client_calls_the_new_endpoints(
    ui: tuple[UiStore, LocalBackend], keyed: TestClient
) -> None:
    store, _ = ui
    # The client closes the http client it is given: one of its own each.
    with MnemorayClient(api_key=KEY_WIDE, http=TestClient(keyed.app)) as client:
        apps = client.list_apps().apps
        assert [a.app_name for a in apps] == [APP] and apps[0].users is not None
        assert client.store_report().doctor.healthy
        page = client.list_memories(APP, ANA, kind="chunk", session_id=ANA_SESSION)
        assert page.memories and {m.kind for m in page.memories} == {"chunk"}
        # iter_memories passes the filters on to every page.
        assert (
            len(page.memories) > 1
            and list(
                client.iter_memories(APP, ANA, page_size=1, kind="chunk", session_id=ANA_SESSION)
            )
            == page.memories
        )
        assert (
            list(client.iter_memories(APP, ANA, since=T_PLANS - 1))
            == client.list_memories(APP, ANA, since=T_PLANS - 1).memories
        )
        hits = client.recall(APP, ANA, "parrot Kiwi", explain=True).memories
        assert hits[0].contributions is not None
        assert hits[0].score == pytest.approx(1 + sum(hits[0].contributions.values()), abs=1e-9)
        turn = client.compile(APP, ANA, ANA_SESSION, AGENT, at_event_id=store.user_turn_ids[0])
        assert turn.total_tokens > 0
    with MnemorayClient(api_key=KEY_ANA, http=TestClient(keyed.app)) as client:
        assert client.list_apps().apps[0].users is None


def test_async_client_iter_memories_passes_the_filters(keyed: TestClient) -> None:
    import asyncio

    from mnemoray.client import AsyncMnemorayClient

    async def both() -> tuple[list[Any], list[Any]]:
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=keyed.app), base_url="http://testserver"
        )
        async with AsyncMnemorayClient(api_key=KEY_WIDE, http=http) as mr:
            got = [
                m
                async for m in mr.iter_memories(
                    APP, ANA, page_size=1, kind="chunk", session_id=ANA_SESSION
                )
            ]
            page = await mr.list_memories(APP, ANA, kind="chunk", session_id=ANA_SESSION)
            return got, page.memories

    got, want = asyncio.run(both())
    assert len(want) > 1 and got == want


# -- sharded Serve mode: a clear typed error, never a 500 ---------------------------------------
def test_store_wide_reads_are_unsupported_without_every_shard(
    ui: tuple[UiStore, LocalBackend], tmp_path: Path
) -> None:
    store, _ = ui
    s = parse_settings(
        {
            "store": str(store.store),
            "ingestion": {
                "sessions_db": str(tmp_path / "sessions.db"),
                "artifacts_dir": str(tmp_path / "artifacts"),
            },
        }
    )
    parts = build_parts(s, None, local_summarizer(s), sharded=True)
    try:
        assert parts.memory is None
        for read in (parts.tenants, parts.store_report):
            with pytest.raises(Unsupported) as exc:
                read()
            assert exc.value.field == "server.index_mode"
    finally:
        parts.stop()
        parts.sessions.close()


# -- shutting down: nothing left running ---------------------------------------------------------
def own_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("mnemoray")}


def test_local_backend_close_waits_for_its_pools_then_stops_every_part(tmp_path: Path) -> None:
    """Pools first (a request's work finishes before the stores close under it), then every
    part in order, each even when one before it fails, the connections last."""
    store = build_ui_store(tmp_path / "store")
    before = own_threads()
    backend = LocalBackend.open(str(store.store), compaction={"enabled": True})
    parts = backend.parts
    assert parts.memory is not None and parts.ingestion is not None
    assert parts.compaction is not None
    order: list[str] = []

    def record(name: str, fn: Any, fail: bool = False) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            order.append(name)
            out = fn(*args, **kwargs)
            if fail:
                raise RuntimeError(f"{name} failed")
            return out

        return step

    parts.memory.close = record("service", parts.memory.close)  # type: ignore[method-assign]
    parts.ingestion.stop = record("ingestion", parts.ingestion.stop, fail=True)  # type: ignore[method-assign]
    parts.compaction.stop = record("compaction", parts.compaction.stop)  # type: ignore[method-assign]
    parts.ingestion.queue.close = record("queue", parts.ingestion.queue.close)  # type: ignore[method-assign]
    parts.sessions.close = record("sessions", parts.sessions.close)  # type: ignore[method-assign]
    backend.io_pool.submit(lambda: (time.sleep(0.3), order.append("request")))
    with pytest.raises(RuntimeError, match="ingestion failed"):
        backend.close()
    assert order == ["request", "service", "ingestion", "compaction", "queue", "sessions"]
    assert not own_threads() - before  # watcher, job worker, pools: all gone


def test_a_failed_start_leaves_no_thread_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mnemoray.http.parts as rp
    from mnemoray.http.parts import ReplicaParts

    store = build_ui_store(tmp_path / "store")
    s = parse_settings({"store": str(store.store)})
    before = own_threads()

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("broken part")

    # After the reloader started: the hygiene, the session store, the background jobs.
    for target, name in (
        (rp, "attach_hygiene"),
        (rp, "open_session_store"),
        (ReplicaParts, "start_jobs"),
    ):
        with monkeypatch.context() as patch:
            patch.setattr(target, name, broken)
            with pytest.raises(RuntimeError, match="broken part"):
                LocalBackend(s)
        assert not own_threads() - before, name


# -- mnemoray ui ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_mnemoray_ui_serves_the_api(ui: tuple[UiStore, LocalBackend], tmp_path: Path) -> None:
    store, _ = ui
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemoray.cli",
            "ui",
            "--store",
            str(store.store),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline, health = time.monotonic() + 60, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.3)
        assert health is not None and health.json() == {"status": "ok"}, proc.poll()
        apps = httpx.get(f"http://127.0.0.1:{port}/v1/apps", timeout=10).json()
        assert [a["app_name"] for a in apps["apps"]] == [APP]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}/ui/" in out


def test_mnemoray_ui_needs_keys_to_bind_other_hosts(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mnemoray.cli.main import app

    result = CliRunner().invoke(app, ["ui", "--store", str(tmp_path / "s"), "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "needs API keys" in result.output
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"k": "no-json"}) + "}")  # broken: one clear line, exit 2
    result = CliRunner().invoke(
        app, ["ui", "--store", str(tmp_path / "s"), "--api-keys", str(keys)]
    )
    assert result.exit_code == 2 and "invalid JSON" in result.output


def test_mnemoray_ui_refuses_a_folder_with_no_store(
    ui: tuple[UiStore, LocalBackend], tmp_path: Path
) -> None:
    """A mistyped --store (or a new empty folder) is one line and exit 2, not a new empty
    store served as if it were the user's."""
    from typer.testing import CliRunner

    from mnemoray.cli.main import app
    from mnemoray.cli.ui import missing_store
    from mnemoray.settings.serve import load_settings

    empty = tmp_path / "empty"
    empty.mkdir()
    for where in (tmp_path / "typo", empty, f"parquet://{tmp_path / 'typo'}", f"lancedb://{empty}"):
        result = CliRunner().invoke(app, ["ui", "--store", str(where)])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert "no memory store at" in lines[0] and "mnemoray import" in lines[0]
    assert not (tmp_path / "typo").exists() and not any(empty.iterdir())
    # A real store, as a path or a URI; a LanceDB head; a session database alone.
    store, _ = ui
    lance = tmp_path / "lance"
    lance.mkdir()
    (lance / "lancedb.json").write_text("{}")
    for where in (str(store.store), f"parquet://{store.store}", f"lancedb://{lance}"):
        s = load_settings({"store": where})
        assert missing_store(s.store_dir, s.sessions_path) is None, where
    s = load_settings({"store": str(empty), "ingestion.sessions_db": str(store.sessions_db)})
    assert missing_store(s.store_dir, s.sessions_path) is None
