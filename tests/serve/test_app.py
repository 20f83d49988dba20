"""The Ray Serve HTTP API end to end: one app per module on the shared local Ray.

The app runs with API keys (every call below carries one), a small body limit and
a fast reload interval; its store is backfilled in-process first. Every route is
exercised over real HTTP (httpx and ``mnemoray.client``) on the default path (direct
ingress: the replica's own HTTP server on ``server.port``); the second apps of the
damaged-store and sharded tests run behind Serve's HTTP proxy (``ingress: proxy``).
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from mnemoray.client import MnemorayAPIError, MnemorayClient
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.sessions.events import user_message
from tests.support.factories import DAY, T0, assert_compiled_without_memory, parrot
from tests.support.factories import session as _session

pytestmark = [pytest.mark.ray, pytest.mark.slow]

APP_NAME = "mnemoray-test"
KEY_A = "test-key-app-aaaaaaaaaaaaaaaa"  # app "app"
KEY_B = "test-key-other-bbbbbbbbbbbbbbbb"  # app "other"
KEY_WIDE = "test-key-app-wide-cccccccccccccc"  # app "app", app-wide recall
MAX_BODY = 256 * 1024


BACKFILL = [
    parrot(),
    _session(
        "cooking",
        T0 + 3 * DAY,
        ("u", "How long should I roast a whole chicken? I like crispy skin."),
        ("m", "Roast it at 220C for about 75 minutes and dry the skin first."),
    ),
    _session(
        "running",
        T0 + 6 * DAY,
        ("u", "I'm training for a half marathon in October."),
        ("m", "Build up to 30-40 km per week with one long run."),
    ),
    _session(
        "carol-1",
        T0,
        ("u", "My favourite board game is chess."),
        ("m", "Chess is a classic."),
        user="carol",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, base: str, store: Path, keys: Path) -> None:
        self.base = base
        self.proxy = base  # Serve's HTTP proxy (apps with ingress: proxy)
        self.store = store
        self.keys = keys

    def client(self, key: str | None = KEY_A) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def server(ray_cluster, tmp_path_factory) -> Server:
    from ray import serve
    from ray.serve.context import _get_global_client

    from mnemoray.serve.app import build_app

    root = tmp_path_factory.mktemp("serve")
    store = root / "store"
    backfill = MemoryService.open(store)
    for s in BACKFILL:
        assert backfill.add_session(s)
    keys = root / "keys.json"
    keys.write_text(
        json.dumps({KEY_A: "app", KEY_B: ["other"], KEY_WIDE: {"apps": ["app"], "app_wide": True}})
    )
    serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
    # If another module started Serve first, its HTTP options stand: ask for the port.
    proxy = _get_global_client().http_config.port
    port = _free_port()  # direct ingress: the replica answers here itself
    # Chosen explicitly: with Serve's proxy running (started above, for the proxy tests),
    # an app that does not choose gets the proxy (mnemoray.serve.ingress_mode).
    serve.run(
        build_app(
            {
                "store": str(store),
                "server": {
                    "api_keys": str(keys),
                    "reload_interval_s": 0.1,
                    "max_body_bytes": MAX_BODY,
                    "port": port,
                    "ingress": "direct",
                },
            }
        ),
        name=APP_NAME,
        route_prefix="/",
    )
    server = Server(f"http://127.0.0.1:{port}", store, keys)
    server.proxy = f"http://127.0.0.1:{proxy}"
    yield server
    serve.delete(APP_NAME)


def recall(
    c: httpx.Client, query: str, user: str = "alice", app: str = "app", **extra
) -> httpx.Response:
    return c.post("/v1/recall", json={"app_name": app, "user_id": user, "query": query, **extra})


# -- health, metrics ------------------------------------------------------------------
def test_healthz_needs_no_key_and_metrics_do(server: Server) -> None:
    with server.client(None) as anon, server.client() as c:
        assert anon.get("/healthz").json() == {"status": "ok"}
        assert anon.get("/metrics").status_code == 401
        recall(c, "parrot")  # something to count
        text = c.get("/metrics").text
    assert 'mnemoray_http_requests_total{method="POST",route="/v1/recall",status="200"}' in text
    assert "mnemoray_http_request_duration_seconds_bucket" in text
    assert "mnemoray_index_rows" in text and "mnemoray_index_reloads_total" in text
    assert "mnemoray_query_embed_batch_size_count" in text
    assert "alice" not in text  # tenants never appear in metrics


# -- recall -------------------------------------------------------------------------------
def test_recall_after_backfill(server: Server) -> None:
    with server.client() as c:
        r = recall(c, "remind me about that flying animal we talked about", top_k=3)
        assert r.status_code == 200, r.text
        body = r.json()
        # GET variant: same answer, no request body.
        g = c.get(
            "/v1/recall",
            params={
                "app_name": "app",
                "user_id": "alice",
                "top_k": 3,
                "query": "remind me about that flying animal we talked about",
            },
        )
        assert g.status_code == 200, g.text
    assert body["took_ms"] > 0 and body["store_version"] >= 1
    top = body["memories"][0]
    assert top["provenance"]["session_id"] == "parrot"
    assert top["provenance"]["source_event_ids"]
    assert "dense" in top["signals"] and top["signals"]["dense_rank"] >= 1
    assert [m["memory_id"] for m in g.json()["memories"]] == [
        m["memory_id"] for m in body["memories"]
    ]


def test_recall_filters_and_modes(server: Server) -> None:
    with server.client() as c:
        r = recall(c, "chicken", filters={"session_id": "cooking", "kinds": ["chunk"]})
        kw = recall(c, "chicken", mode="keyword")
        none = recall(c, "chicken", user="nobody")
    assert r.status_code == 200, r.text
    assert r.json()["memories"] and all(
        m["kind"] == "chunk" and m["provenance"]["session_id"] == "cooking"
        for m in r.json()["memories"]
    )
    assert "dense" not in kw.json()["memories"][0]["signals"]
    assert none.json()["memories"] == []


# -- memories: add, list, forget --------------------------------------------------------------
def test_online_add_then_recall_within_a_second(server: Server) -> None:
    with server.client() as c:
        r = c.post(
            "/v1/memories",
            json={
                "app_name": "app",
                "user_id": "dave",
                "memories": [{"text": "Dave's favourite colour is teal.", "topics": ["colour"]}],
            },
        )
        assert r.status_code == 201, r.text
        assert r.json()["added"] == 1
        added_id = r.json()["memories"][0]["memory_id"]
        deadline = time.time() + 1.0
        while True:
            got = recall(c, "what colour does Dave like", user="dave").json()["memories"]
            if got or time.time() > deadline:
                break
    assert got and got[0]["memory_id"] == added_id


def test_add_session_through_the_client(server: Server) -> None:
    session = _session(
        "guitar",
        T0 + 9 * DAY,
        ("u", "I started guitar lessons on Tuesdays."),
        ("m", "Nice, practice chords daily."),
        user="erin",
    )
    with MnemorayClient(server.base, KEY_A) as mr:
        out = mr.add_session(session)
        assert out.added > 0
        assert mr.add_session(session).added == 0  # ledgered: idempotent
        found = mr.recall("app", "erin", "when are my music lessons").memories
    with server.client() as c:
        mismatch = c.post(
            "/v1/memories",
            json={
                "app_name": "app",
                "user_id": "erin",
                "session": {**session.to_dict(), "user_id": "frank"},
            },
        )
    assert found[0].provenance.session_id == "guitar"
    assert mismatch.status_code == 422
    assert mismatch.json()["error"]["field"] == "session.user_id"


def test_list_memories_paged(server: Server) -> None:
    with MnemorayClient(server.base, KEY_A) as mr:
        first = mr.list_memories("app", "alice", limit=2)
        everything = list(mr.iter_memories("app", "alice", page_size=3))
        with pytest.raises(MnemorayAPIError) as bad:
            mr.list_memories("app", "alice", cursor="not-a-cursor")
    assert len(first.memories) == 2 and first.next_cursor
    ids = [m.memory_id for m in everything]
    assert len(ids) == len(set(ids)) > 3
    assert ids[:2] == [m.memory_id for m in first.memories]
    assert bad.value.status == 422 and bad.value.field == "cursor"


def test_forget_then_recall(server: Server) -> None:
    with MnemorayClient(server.base, KEY_A) as mr:
        added = mr.add_memories(
            "app", "gina", ["Gina is allergic to peanuts.", "Gina lives in Lisbon."]
        )
        ids = [m.memory_id for m in added.memories]
        assert mr.forget_memory("app", "gina", ids[0]) == 1
        left = mr.recall("app", "gina", "peanut allergy").memories
        assert ids[0] not in [m.memory_id for m in left]
        with pytest.raises(MnemorayAPIError) as again:
            mr.forget_memory("app", "gina", ids[0])
        with pytest.raises(MnemorayAPIError) as foreign:  # alice cannot forget gina's
            mr.forget_memory("app", "alice", ids[1])
        assert mr.forget_user("app", "gina") == 1
        assert mr.recall("app", "gina", "where does Gina live").memories == []
    assert again.value.status == 404 and foreign.value.status == 404


def test_hot_reload_while_querying(server: Server) -> None:
    """Another MemoryService writes the store from outside while a client queries:
    no request fails, and the new memory becomes visible."""
    statuses: list[int] = []
    found = threading.Event()
    stop = threading.Event()

    def query() -> None:
        with server.client() as c:
            while not stop.is_set():
                r = recall(c, "what is the secret codeword", user="carol")
                statuses.append(r.status_code)
                if r.status_code == 200 and any(
                    "zanzibar" in m["text"] for m in r.json()["memories"]
                ):
                    found.set()

    with server.client() as c:
        reloads_before = _metric(c.get("/metrics").text, "mnemoray_index_reloads_total")
    thread = threading.Thread(target=query)
    thread.start()
    try:
        time.sleep(0.5)
        writer = MemoryService.open(server.store)  # a second instance, same directory
        writer.add_memories(
            [Memory("app", "carol", "external", "fact", "The secret codeword is zanzibar.")]
        )
        assert found.wait(10), "the externally written memory never became visible"
        time.sleep(0.3)  # keep querying on the new snapshot for a moment
    finally:
        stop.set()
        thread.join(30)
    with server.client() as c:
        reloads_after = _metric(c.get("/metrics").text, "mnemoray_index_reloads_total")
    assert len(statuses) >= 5
    assert set(statuses) == {200}, f"failed requests during the swap: {statuses}"
    assert reloads_after > reloads_before


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


# -- tenants ----------------------------------------------------------------------------------
def test_tenant_isolation(server: Server) -> None:
    with (
        server.client(KEY_B) as b,
        server.client(None) as anon,
        server.client("unknown-key-0123456789abcdef") as bad,
        server.client() as a,
    ):
        assert recall(anon, "parrot").status_code == 401
        assert recall(bad, "parrot").status_code == 401
        assert (
            a.post(
                "/v1/recall",
                headers={"Authorization": "Basic xyz"},
                json={"app_name": "app", "user_id": "alice", "query": "q"},
            ).status_code
            == 401
        )
        denied = [
            recall(b, "parrot"),
            b.get("/v1/recall", params={"app_name": "app", "user_id": "alice", "query": "x"}),
            b.post(
                "/v1/memories",
                json={"app_name": "app", "user_id": "alice", "memories": [{"text": "injected"}]},
            ),
            b.get("/v1/memories", params={"app_name": "app", "user_id": "alice"}),
            b.delete("/v1/users/app/alice/memories"),
            b.delete("/v1/memories/whatever", params={"app_name": "app", "user_id": "alice"}),
            b.post("/v1/sessions", json={"app_name": "app", "user_id": "alice"}),
            b.get("/v1/sessions/parrot", params={"app_name": "app", "user_id": "alice"}),
            b.post(
                "/v1/context:compile",
                json={
                    "app_name": "app",
                    "user_id": "alice",
                    "session_id": "s",
                    "agent": {"name": "x"},
                },
            ),
            b.put("/v1/artifacts/app/alice/s1/notes", content=b"x"),
            b.get("/v1/artifacts/app/alice/s1/notes"),
        ]
        assert [r.status_code for r in denied] == [403] * len(denied)
        assert "app_name" in denied[0].json()["error"]["message"]
        # B's own app works, and the same user id there is a different tenant.
        assert (
            b.post(
                "/v1/memories",
                json={
                    "app_name": "other",
                    "user_id": "alice",
                    "memories": [{"text": "Other app secret: kumquat."}],
                },
            ).status_code
            == 201
        )
        mine = recall(b, "secret", app="other").json()["memories"]
        theirs = recall(a, "other app secret kumquat").json()["memories"]
        assert mine and mine[0]["text"].startswith("Other app secret")
        assert all("kumquat" not in m["text"] for m in theirs)
        assert recall(a, "kumquat", app="other").status_code == 403


# -- bad input ----------------------------------------------------------------------------------
def test_malformed_requests_are_4xx_naming_the_field(server: Server) -> None:
    with server.client() as c:

        def err(r: httpx.Response, status: int) -> dict:
            assert r.status_code == status, (r.status_code, r.text)
            body = r.json()["error"]
            assert body["request_id"] == r.headers["x-request-id"]
            return body

        assert (
            err(c.post("/v1/recall", json={"app_name": "app", "query": "q"}), 422)["field"]
            == "user_id"
        )
        assert err(recall(c, "x" * 2001), 422)["field"] == "query"
        assert err(recall(c, "q", top_k=0), 422)["field"] == "top_k"
        assert err(recall(c, "q", top_k=101), 422)["field"] == "top_k"
        assert err(recall(c, "q", topk=3), 422)["field"] == "topk"
        assert err(recall(c, "q", mode="fuzzy"), 422)["field"] == "mode"
        assert err(recall(c, "q", filters={"kinds": ["poem"]}), 422)["field"].startswith(
            "filters.kinds"
        )
        assert (
            "filters.after" in err(recall(c, "q", filters={"after": "yesterday"}), 422)["message"]
        )
        assert err(recall(c, "   "), 422)["field"] == "query"
        assert (
            err(
                c.post(
                    "/v1/recall", content=b"{not json", headers={"Content-Type": "application/json"}
                ),
                400,
            )["field"]
            == "body"
        )
        assert err(c.post("/v1/recall", json=["a", "list"]), 422)
        assert err(c.post("/v1/memories", json={"app_name": "app", "user_id": "u"}), 422)[
            "message"
        ].endswith("pass exactly one of 'session' or 'memories'")
        assert (
            err(
                c.post(
                    "/v1/memories",
                    json={
                        "app_name": "app",
                        "user_id": "u",
                        "memories": [{"text": "t", "kind": "x"}],
                    },
                ),
                422,
            )["field"]
            == "memories.0.kind"
        )
        assert (
            "events[1].role"
            in err(
                c.post(
                    "/v1/memories",
                    json={
                        "app_name": "app",
                        "user_id": "u",
                        "session": {
                            "session_id": "s",
                            "events": [
                                {"author": "user", "text": "hi"},
                                {"author": "user", "role": "bot"},
                            ],
                        },
                    },
                ),
                422,
            )["message"]
        )
        big = {"app_name": "app", "user_id": "u", "memories": [{"text": "x" * 30_000}] * 10}
        assert err(c.post("/v1/memories", json=big), 413)["status"] == 413

        def chunks():  # no Content-Length: the limit is enforced while streaming
            for _ in range(40):
                yield b" " * 10_000

        assert (
            c.post(
                "/v1/recall", content=chunks(), headers={"Content-Type": "application/json"}
            ).status_code
            == 413
        )
        assert c.get("/v1/nothing-here").status_code == 404
        assert c.get("/v1/memories", params={"app_name": "app"}).status_code == 422
        assert (
            err(c.get("/v1/memories", params={"app_name": "app", "user_id": "u", "limit": 0}), 422)[
                "field"
            ]
            == "limit"
        )


# -- sessions -----------------------------------------------------------------------------------
def test_session_lifecycle_end_ingests_memories(server: Server) -> None:
    who = {"app_name": "app", "user_id": "hank"}
    with server.client() as c:
        r = c.post("/v1/sessions", json={**who, "session_id": "trip", "state": {"tier": "gold"}})
        assert r.status_code == 201, r.text
        assert r.json()["version"] == 0
        assert c.post("/v1/sessions", json={**who, "session_id": "trip"}).status_code == 409
        ev = [
            {
                "author": "user",
                "role": "user",
                "text": "I am flying to Tokyo next month for a conference.",
                "id": "t1",
            },
            {"author": "assistant", "role": "model", "text": "Enjoy Tokyo!", "id": "t2"},
        ]
        r = c.post("/v1/sessions/trip/events", json={**who, "events": ev, "expected_version": 0})
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 2 and r.json()["event_ids"] == ["t1", "t2"]
        stale = c.post(
            "/v1/sessions/trip/events",
            json={**who, "expected_version": 1, "events": [{"author": "user"}]},
        )
        assert stale.status_code == 409 and "expected_version" in stale.json()["error"]["message"]
        dup = c.post("/v1/sessions/trip/events", json={**who, "events": [ev[0]]})
        assert dup.status_code == 409
        bad = c.post(
            "/v1/sessions/trip/events",
            json={**who, "events": [{"author": "user", "role": "robot"}]},
        )
        assert bad.status_code == 422 and "events[0].role" in bad.json()["error"]["message"]
        missing = c.post("/v1/sessions/nope/events", json={**who, "events": ev})
        assert missing.status_code == 404
        got = c.get("/v1/sessions/trip", params=who).json()
        assert got["state"] == {"tier": "gold"} and len(got["events"]) == 2
        assert c.get("/v1/sessions/nope", params=who).status_code == 404
        assert [s["session_id"] for s in c.get("/v1/sessions", params=who).json()["sessions"]] == [
            "trip"
        ]
        assert recall(c, "where am I travelling", user="hank").json()["memories"] == []

        # 202: the session is ended and its ingestion job is on disk; the job runs after.
        end = c.post("/v1/sessions/trip:end", json=who)
        assert end.status_code == 202, end.text
        assert set(end.json()) == {"session_id", "ended_at", "job_id"}
        job_id = end.json()["job_id"]
        deadline = time.time() + 30
        while (job := c.get(f"/v1/jobs/{job_id}", params=who).json())["status"] in (
            "queued",
            "running",
        ) and time.time() < deadline:
            time.sleep(0.05)
        assert job["status"] == "done" and job["memories_added"] > 0, job
        assert job["error"] is None
        assert c.get(f"/v1/jobs/{job_id}", params={**who, "user_id": "ivy"}).status_code == 404
        found = recall(c, "where am I travelling", user="hank").json()["memories"]
        assert found and "Tokyo" in found[0]["text"]
        assert found[0]["provenance"]["session_id"] == "trip"
        # ?wait=true: today's synchronous answer; ending again runs ingestion again.
        again = c.post("/v1/sessions/trip:end", params={"wait": "true"}, json=who)
        assert again.status_code == 200, again.text
        assert again.json()["ingestion"] == {
            "status": "unchanged",
            "memories_added": 0,
            "error": None,
        }
        assert again.json()["ended_at"] == end.json()["ended_at"]
        assert "mnemoray_ingestion_queue_depth" in c.get("/metrics").text
        late = c.post(
            "/v1/sessions/trip/events",
            json={**who, "events": [{"author": "user", "text": "one more thing"}]},
        )
        assert late.status_code == 409
        assert c.post("/v1/sessions/nope:end", json=who).status_code == 404


# -- compile ------------------------------------------------------------------------------------
def test_compile_returns_request_and_trace(server: Server) -> None:
    who = {"app_name": "app", "user_id": "alice"}
    with MnemorayClient(server.base, KEY_A) as mr:
        mr.create_session("app", "alice", "chat", state={"user:name": "Alice"})
        mr.append_events("app", "alice", "chat", [user_message("Hi there!")])
        out = mr.compile(
            "app",
            "alice",
            "chat",
            {
                "name": "helper",
                "static_instruction": "You are helpful.",
                "instruction": "The user is {user:name}.",
                "memory_preload": True,
                "preload_top_k": 2,
                "memory_tools": ["load_memory"],
            },
            new_message="tell me about that flying animal again",
        )
        with pytest.raises(MnemorayAPIError) as missing_key:
            mr.compile("app", "alice", "chat", {"name": "h", "instruction": "Hi {nope}"})
        with pytest.raises(MnemorayAPIError) as no_session:
            mr.compile("app", "alice", "missing", {"name": "h"})
        with pytest.raises(MnemorayAPIError) as bad_agent:
            mr.compile("app", "alice", "chat", {"name": "h", "include_contents": "all"})
    assert out.system_instruction.startswith("You are helpful.")
    assert "The user is Alice." in out.system_instruction
    block = out.contents[-2].text  # just before the new message (the default placement)
    assert block.startswith("<memory>") and "parrot" in block
    assert "<memory>" not in out.system_instruction
    names = [step.name for step in out.trace]
    assert "memory_preload" in names and "instruction" in names
    preload = next(s for s in out.trace if s.name == "memory_preload")
    assert preload.detail["memory_ids"]
    assert out.total_tokens == sum(s.tokens_added for s in out.trace)
    assert out.prefix_hash and (out.contents[-1].parts[0].text or "").startswith("tell me")
    assert any(t["name"] == "load_memory" for t in out.tools)
    assert missing_key.value.status == 422 and "nope" in missing_key.value.message
    assert no_session.value.status == 404
    assert bad_agent.value.status == 422 and bad_agent.value.field == "agent.include_contents"
    del who


def test_compile_with_an_unreadable_store_answers_without_memories(
    server: Server, tmp_path: Path
) -> None:
    """The issue-12 contract: preload while the memory store is unreadable (alice's shard
    damaged, in a copy of the store served under /damaged) is a 200 without memories
    whose trace names the failed step; /metrics counts it."""
    from ray import serve

    from mnemoray.serve.app import build_app

    store = tmp_path / "store"
    shutil.copytree(server.store, store)
    m = MemoryStore(store).manifest()
    shard = shard_of("app", "alice", m.shards)
    for entry in m.segments[shard]:
        (store / "memories" / f"shard={shard:04d}" / f"{entry.name}.parquet").write_bytes(
            b"PAR1 truncated"
        )
    name = APP_NAME + "-damaged"
    serve.run(
        build_app(
            {
                "store": str(store),
                "server": {"api_keys": str(server.keys), "ingress": "proxy"},
                "models": {"embedder_deployment": False, "summarizer_deployment": False},
            }
        ),
        name=name,
        route_prefix="/damaged",
    )
    body = {
        "app_name": "app",
        "user_id": "alice",
        "session_id": "degraded",
        "agent": {
            "name": "helper",
            "static_instruction": "You are helpful.",
            "memory_preload": True,
        },
        "new_message": "that flying animal again",
    }
    try:
        with httpx.Client(
            base_url=server.proxy + "/damaged",
            timeout=60,
            headers={"Authorization": f"Bearer {KEY_A}"},
        ) as c:
            assert (
                c.post(
                    "/v1/sessions",
                    json={"app_name": "app", "user_id": "alice", "session_id": "degraded"},
                ).status_code
                == 201
            )
            assert recall(c, "flying animal").status_code == 500  # recall itself fails
            r = c.post("/v1/context:compile", json=body)
            metrics = c.get("/metrics").text
    finally:
        serve.delete(name)
    assert r.status_code == 200, r.text
    out = r.json()
    assert_compiled_without_memory(out)
    assert str(store) not in r.text
    assert (
        'mnemoray_compile_degraded_total{error="StoreCorrupt",step="memory_preload"} 1.0' in metrics
    )


# -- artifacts ----------------------------------------------------------------------------------
def test_artifacts_put_get_versions(server: Server) -> None:
    with MnemorayClient(server.base, KEY_A) as mr:
        v0 = mr.put_artifact(
            "app",
            "alice",
            "s1",
            "report.csv",
            "a,b\n1,2\n",
            mime_type="text/csv",
            summary="first draft",
        )
        v1 = mr.put_artifact(
            "app",
            "alice",
            "s1",
            "report.csv",
            b"a,b\n3,4\n",
            mime_type="text/csv",
            summary="second draft, ünïcode",
        )
        latest = mr.get_artifact("app", "alice", "s1", "report.csv")
        first = mr.get_artifact("app", "alice", "s1", "report.csv", version=0)
        versions = mr.artifact_versions("app", "alice", "s1", "report.csv")
        mr.put_artifact("app", "alice", "s2", "user:profile", "likes parrots")
        names = mr.artifact_names("app", "alice", "s1")
        with pytest.raises(MnemorayAPIError) as nope:
            mr.get_artifact("app", "alice", "s1", "report.csv", version=7)
        with pytest.raises(MnemorayAPIError) as bad_name:
            mr.put_artifact("app", "alice", "s1", "bad\x01name", "x")
    assert (v0.version, v1.version) == (0, 1)
    assert v1.handle == "artifact://app/alice/s1/report.csv@1"
    assert latest.data == b"a,b\n3,4\n" and latest.version == 1
    assert latest.mime_type.startswith("text/csv") and latest.summary == "second draft, ünïcode"
    assert first.text() == "a,b\n1,2\n"
    assert versions == [0, 1]
    assert names == ["report.csv", "user:profile"]
    assert nope.value.status == 404
    assert bad_name.value.status == 422 and bad_name.value.field == "name"


def test_offloaded_tool_result_callee_and_compile_metrics(server: Server) -> None:
    """The live loop's payload path on the real app (SQLite sessions, artifacts on disk):
    a 60 KB tool result is offloaded on append, a callee is handed it, /metrics counts."""
    rows = {"rows": [{"id": i, "text": "lorem ipsum dolor " * 3} for i in range(1000)]}
    with MnemorayClient(server.base, KEY_A) as mr:
        mr.create_session("app", "alice", "tools")
        mr.append_events(
            "app",
            "alice",
            "tools",
            [
                {"author": "user", "role": "user", "text": "fetch the rows"},
                {
                    "author": "bot",
                    "role": "model",
                    "type": "tool_call",
                    "data": {"name": "fetch", "args": {}, "call_id": "c1"},
                },
                {
                    "author": "bot",
                    "role": "tool",
                    "type": "tool_result",
                    "data": {"name": "fetch", "response": rows, "call_id": "c1"},
                },
            ],
        )
        stored = mr.get_session("app", "alice", "tools").events[-1]["data"]["response"]
        name = stored["artifact"]
        payload = mr.get_artifact("app", "alice", "tools", name)
        agent = {
            "name": "bot",
            "static_instruction": "Stable prefix.",
            "memory_tools": ["load_artifacts"],
        }
        caller = [mr.compile("app", "alice", "tools", agent) for _ in range(2)][-1]
        callee = mr.compile(
            "app",
            "alice",
            "tools",
            {"name": "reader"},
            callee={"prompt": "Count the rows.", "artifacts": [name]},
        )
        metrics = mr.metrics()
    assert stored["offloaded"] is True and json.loads(payload.data) == rows
    assert caller.total_tokens < 1_000 and name in caller.system_instruction
    static = next(t for t in caller.trace if t.name == "static_instruction")
    assert static.detail["prefix_reuse"]["reused"] is True
    texts = [p.text for c in callee.contents for p in c.parts]
    assert texts[-1] == "Count the rows." and '"id": 999' in (texts[0] or "")
    assert "fetch the rows" not in callee.model_dump_json()
    assert "mnemoray_compile_context_tokens_count" in metrics
    assert "mnemoray_compile_prefix_reuse_rate" in metrics


# -- the sharded layout: Index deployment multiplexed by shard ---------------------------------
def test_index_deployment_multiplexed_by_shard(server: Server) -> None:
    """index_mode=deployment: the ingress embeds, the shard's Index replica searches and
    writes (second app on the same store, under /sharded)."""
    from ray import serve

    from mnemoray.serve.app import build_app

    name = APP_NAME + "-sharded"
    serve.run(
        build_app(
            {
                "store": str(server.store),
                "server": {
                    "api_keys": str(server.keys),
                    "index_mode": "deployment",
                    "ingress": "proxy",
                    "reload_interval_s": 0.1,
                },
                "models": {"embedder_deployment": False, "summarizer_deployment": False},
            }
        ),
        name=name,
        route_prefix="/sharded",
    )
    try:
        # App-wide recall: every shard's replica proposes, the ingress ranks; the answer
        # is the unsharded app's (mnemoray.memory.service.app_recall).
        for query in ("that flying animal we talked about", "roast chicken"):
            with (
                MnemorayClient(server.proxy + "/sharded", KEY_WIDE) as wide,
                MnemorayClient(server.base, KEY_WIDE) as whole,
            ):
                sharded = wide.recall_app("app", query, top_k=5).memories
                assert sharded and [(m.user_id, m.memory_id) for m in sharded] == [
                    (m.user_id, m.memory_id)
                    for m in whole.recall_app("app", query, top_k=5).memories
                ]
        with MnemorayClient(server.proxy + "/sharded", KEY_A) as mr:
            top = mr.recall("app", "alice", "that flying animal we talked about").memories
            assert top[0].provenance.session_id == "parrot"
            added = mr.add_memories("app", "ivan", ["Ivan collects vintage stamps."])
            got = mr.recall("app", "ivan", "what does Ivan collect").memories
            assert got[0].memory_id == added.memories[0].memory_id
            assert [m.memory_id for m in mr.iter_memories("app", "ivan")] == [
                added.memories[0].memory_id
            ]
            mr.create_session("app", "ivan", "hobby")
            mr.append_events("app", "ivan", "hobby", [user_message("I also restore old bicycles.")])
            ended = mr.end_session("app", "ivan", "hobby", wait=True)
            assert ended.ingestion.status == "ingested"
            assert mr.recall("app", "ivan", "bicycles").memories
            assert mr.forget_user("app", "ivan") >= 2
            assert mr.recall("app", "ivan", "stamps").memories == []
        # The first app (index in its ingress) sees the shard replica's writes too, once
        # its watcher has reloaded (every 0.1 s here).
        with server.client() as c:
            deadline = time.time() + 5
            while recall(c, "stamps", user="ivan").json()["memories"] and time.time() < deadline:
                time.sleep(0.05)
            assert recall(c, "stamps", user="ivan").json()["memories"] == []
            assert recall(c, "flying animal").json()["memories"]
    finally:
        serve.delete(name)


# -- hostile input -----------------------------------------------------------------------------
def test_hostile_requests_never_answer_5xx(server: Server) -> None:
    """A thousand malformed requests (benchmarks.hostile_requests) over every route: each is
    a 4xx or a valid write, never a 5xx; afterwards the tenant's recall, compile and list
    still answer 200 (nothing non-finite got stored) and other tenants are intact."""
    from benchmarks.hostile_requests import hostile_requests

    who = {"app_name": "app", "user_id": "fuzz"}
    fives: list[tuple[str, int, str]] = []
    with server.client() as c:
        assert c.post("/v1/sessions", json={**who, "session_id": "fz"}).status_code == 201
        cases = hostile_requests("app", "fuzz", "fz")
        for case in cases:
            headers = {"content-type": "application/json", **case.headers}
            r = c.request(
                case.method, case.path, content=case.body, params=case.params, headers=headers
            )
            if r.status_code >= 500:
                fives.append((case.name, r.status_code, r.text[:200]))
        assert not fives, f"{len(fives)} of {len(cases)} answered 5xx: {fives[:10]}"
        assert len(cases) > 500
        assert recall(c, "Madrid", user="fuzz").status_code == 200
        assert c.get("/v1/memories", params=who).status_code == 200
        r = c.post(
            "/v1/context:compile",
            json={
                **who,
                "session_id": "fz",
                "agent": {"name": "helper", "memory_preload": True},
                "new_message": "where do I live?",
            },
        )
        assert r.status_code == 200, r.text
        assert c.get("/v1/sessions/fz", params=who).status_code == 200
        assert "parrot" in recall(c, "parrot").json()["memories"][0]["text"].lower()


@pytest.mark.browser
def test_the_memory_inspector_under_serve(server: Server, tmp_path: Path) -> None:
    """The page at /ui/ of the Serve app (direct ingress, with keys) in a real Chromium:
    every view renders its data, and the memories view shows the parrot."""
    from mnemoray.ui.browser import missing_reason, new_page, open_browser
    from mnemoray.ui.screenshots import KEY_ITEM, take_screenshots

    why = missing_reason()
    if why is not None:
        pytest.skip(f"no browser: {why}")
    with MnemorayClient(server.base, KEY_WIDE) as mr:
        mr.create_session("app", "alice", "inspect", state={"user:name": "Alice"})
        mr.append_events(
            "app", "alice", "inspect", [user_message("Remind me what my parrot likes to eat.")]
        )
    paths = take_screenshots(
        server.base, tmp_path, "app", "alice", "inspect", "that flying animal", api_key=KEY_WIDE
    )
    assert [p.name for p in paths] == [
        "memories.png",
        "recall.png",
        "session.png",
        "compile.png",
        "health.png",
    ]
    assert all(p.stat().st_size > 5_000 for p in paths)
    with open_browser() as browser, new_page(browser) as page:
        page.add_init_script(f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(KEY_A)})")
        page.goto(f"{server.base}/ui/?app_name=app&user_id=alice")
        cards = page.get_by_test_id("memory-card")
        cards.first.wait_for()
        assert "parrot" in " ".join(cards.all_inner_texts()).lower()
