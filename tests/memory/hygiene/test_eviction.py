"""Per-user limits and eviction: the three policies, recall usage counted off the
recall path, enforcement after writes in-process and over HTTP (keyword-only store)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mnemoray.errors import InvalidInput
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.http.metrics import Metrics
from mnemoray.jobs.consolidate import main as job_main
from mnemoray.memory.hygiene.attach import MemoryHygiene, attach_hygiene
from mnemoray.memory.hygiene.evict import EvictionPolicy, eviction_order, value
from mnemoray.memory.hygiene.usage import RecallUsage
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.settings.hygiene import hygiene_settings
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.service_backend import ServiceBackend

T = 1_700_000_000.0
DAY = 86_400.0
KEY = "k-eviction-test-key-0123"
WORDS = ["parrot", "chicken", "marathon", "violin", "glacier", "tulip", "saffron", "kayak"]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MemoryService]:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    yield svc
    svc.close()


def fact(
    i: int, user: str = "ana", app: str = "app", kind: str = "fact", at: float | None = None
) -> Memory:
    return Memory(
        app,
        user,
        "online",
        kind,
        f"I like the {WORDS[i]} a lot.",  # type: ignore[arg-type]
        created_at=T + i * DAY if at is None else at,
    )


def live(svc: MemoryService, user: str = "ana", app: str = "app") -> list[str]:
    svc.reloader.refresh()
    return [m.text.split()[3] for m in svc.snapshot().rows_for_user(app, user)]


def attach(svc: MemoryService, **limits: object) -> MemoryHygiene:
    return attach_hygiene(svc, hygiene_settings({"limits": limits, "usage_flush_s": 0.05}))


def test_oldest_is_evicted_after_a_write_with_a_reason(service: MemoryService) -> None:
    hygiene = attach(service, max_memories=5, policy="oldest")
    try:
        service.add_memories([fact(i) for i in range(8)])
        assert hygiene.drain()
        assert live(service) == WORDS[3:8]
        gone = service.forgotten("app", "ana")
        assert {(t["reason"], t["actor"]) for t in gone} == {("evicted:oldest", "eviction")}
        assert hygiene.limits is not None and hygiene.limits.evicted == 3
        assert service.stats()["memories_evicted"] == 3
        assert "mnemoray_memories_evicted_total 3.0" in Metrics(service.stats).render().decode()
    finally:
        hygiene.stop()


def test_least_recently_recalled_keeps_what_was_recalled(service: MemoryService) -> None:
    hygiene = attach(service, max_memories=4)  # the default policy
    assert hygiene.usage is not None
    try:
        service.add_memories([fact(i) for i in range(4)])
        assert hygiene.drain()
        # Recall the two oldest: their last use is now, later than any creation.
        for word in ("parrot", "chicken"):
            assert service.search("app", "ana", word, top_k=1)[0].memory.text.split()[3] == word
        assert service.hooks.flush()
        service.add_memories([fact(i, at=time.time()) for i in (4, 5)])
        assert hygiene.drain()
        assert sorted(live(service)) == sorted(["parrot", "chicken", "glacier", "tulip"])
        reasons = {t["reason"] for t in service.forgotten("app", "ana")}
        assert reasons == {"evicted:least_recently_recalled"}
    finally:
        hygiene.stop()


def test_lowest_value_weighs_kind_recalls_and_idleness() -> None:
    policy = EvictionPolicy(max_memories=1, policy="lowest_value", half_life_s=DAY)
    now = T + 10 * DAY
    chunk, summary = fact(0, kind="chunk", at=now), fact(1, kind="session_summary", at=now)
    assert value(summary, {}, policy, now) == 2 * value(chunk, {}, policy, now)
    recalled = {chunk.memory_id: (3, now)}
    assert value(chunk, recalled, policy, now) == 4 * value(chunk, {}, policy, now)
    idle = fact(2, kind="chunk", at=now - DAY)
    assert value(idle, {}, policy, now) == pytest.approx(value(chunk, {}, policy, now) / 2)
    order = eviction_order([summary, chunk, idle], {}, policy, now)
    assert [m.memory_id for m in order] == [idle.memory_id, chunk.memory_id, summary.memory_id]


def test_per_app_limits(service: MemoryService) -> None:
    settings = hygiene_settings(
        {
            "limits": {"max_memories": 2, "policy": "oldest"},
            "apps": {"free": {"limits": {"max_memories": 0}}},
        }
    )
    hygiene = attach_hygiene(service, settings)
    assert hygiene.usage is None  # "oldest" needs no recall counts
    try:
        service.add_memories([fact(i) for i in range(4)] + [fact(i, app="free") for i in range(4)])
        assert hygiene.drain()
        assert live(service) == WORDS[2:4] and len(live(service, app="free")) == 4
    finally:
        hygiene.stop()


def test_enforce_all_covers_users_written_before(service: MemoryService) -> None:
    service.add_memories([fact(i, user=u) for u in ("ana", "bob") for i in range(3)])
    hygiene = attach(service, max_memories=1, policy="oldest")
    try:
        assert hygiene.limits is not None
        evicted = hygiene.limits.enforce_all()
        assert {k: len(v) for k, v in evicted.items()} == {("app", "ana"): 2, ("app", "bob"): 2}
        assert live(service, "bob") == [WORDS[2]]
    finally:
        hygiene.stop()


def test_recall_usage_is_flushed_and_replicas_add_up(tmp_path: Path) -> None:
    path = tmp_path / "usage.db"
    a, b = RecallUsage(path), RecallUsage(path)
    a.touch("app", "ana", ["m1", "m2"], at=10.0)
    a.touch("app", "ana", ["m1"], at=20.0)
    assert a.of_user("app", "ana") == {"m1": (2, 20.0), "m2": (1, 10.0)}  # pending, read
    assert a.flush() == 2 and a.flush() == 0
    b.touch("app", "ana", ["m1"], at=15.0)
    b.flush()
    assert a.of_user("app", "ana")["m1"] == (3, 20.0)  # added, last use kept
    a.drop("app", "ana", ["m1"])
    assert b.of_user("app", "ana") == {"m2": (1, 10.0)} and a.of_user("app", "bob") == {}


def test_the_flusher_writes_in_the_background(service: MemoryService) -> None:
    hygiene = attach_hygiene(
        service, hygiene_settings({"track_usage": True, "usage_flush_s": 0.05})
    )
    assert hygiene.usage is not None and hygiene.limits is None
    try:
        service.add_memories([fact(0)])
        service.search("app", "ana", "parrot")
        deadline = time.monotonic() + 10
        row = None
        while row is None and time.monotonic() < deadline:
            row = hygiene.usage.db.conn().execute("SELECT recalls FROM usage").fetchone()
            time.sleep(0.02)
        assert row == (1,)
    finally:
        hygiene.stop()


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_memories": -1}, "hygiene.limits.max_memories"),
        ({"policy": "random"}, "hygiene.limits.policy"),
        ({"half_life_s": 0}, "hygiene.limits.half_life_s"),
    ],
)
def test_bad_limits_name_their_key(limits: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        hygiene_settings({"limits": limits})
    assert exc.value.field == field


def test_limits_hold_over_http(service: MemoryService) -> None:
    hygiene = attach(service, max_memories=3, policy="oldest")
    client = TestClient(
        build_api(
            ServiceBackend(service),  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({KEY: "app"})),
        ),
        headers={"Authorization": f"Bearer {KEY}"},
    )
    try:
        for word in WORDS[:5]:
            r = client.post(
                "/v1/memories",
                json={
                    "app_name": "app",
                    "user_id": "ana",
                    "memories": [{"text": f"I like {word}."}],
                },
            )
            assert r.status_code == 201, r.text
        assert hygiene.drain()
        listed = client.get("/v1/memories", params={"app_name": "app", "user_id": "ana"})
        texts = [m["text"] for m in listed.json()["memories"]]
        assert texts == [f"I like {w}." for w in WORDS[2:5]]
    finally:
        hygiene.stop()


def test_the_scheduled_job_enforces_limits_on_writes_it_did_not_see(
    service: MemoryService, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    service.add_memories([fact(i) for i in range(5)])  # e.g. a backfill: no hooks attached
    config = tmp_path / "settings.json"
    config.write_text(
        json.dumps(
            {
                "hygiene": {
                    "limits": {"max_memories": 2, "policy": "oldest"},
                    "consolidation": {"enabled": False},
                },
                "models": {"embedder": "none"},
            }
        )
    )
    argv = [
        "--store",
        str(service.store.root),
        "--config",
        str(config),
        "--enforce-limits",
        "--json",
    ]
    assert job_main(argv, out=io.StringIO()) == 0
    assert json.loads(capsys.readouterr().out)["memories_evicted"] == 3
    assert live(service) == WORDS[3:5]


def test_closing_a_served_service_stops_its_hygiene_and_keeps_recall_counts(tmp_path: Path) -> None:
    from mnemoray.memory.hygiene.attach import close_service
    from mnemoray.memory.service.webhook import Webhook

    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    hygiene = attach(svc, max_memories=5, policy="least_recently_recalled")
    hygiene_db = RecallUsage.of_store(svc.store.root)
    hygiene.usage.flush_interval_s = 3600.0  # only a clean shutdown writes the counts
    webhook = Webhook("http://127.0.0.1:9/unreachable", timeout_s=0.5).attach(svc.hooks)
    svc.add_memories([fact(0)])
    assert svc.search("app", "ana", "parrot")
    threads = [
        svc.hooks._thread,
        hygiene.limits._thread,
        hygiene.usage._flusher._thread,
        webhook.outbox._thread,
    ]
    assert all(t is not None and t.is_alive() for t in threads)
    close_service(svc, hygiene, webhook)
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert [n for n, _ in hygiene_db.of_user("app", "ana").values()] == [1]
