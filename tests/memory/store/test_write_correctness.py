"""Write correctness: tenant isolation and data integrity.

- an older copy of a session never replaces a newer one, whatever the read order
  (batch, file, run, engine commit order, online ingestion);
- acknowledgements say what was really written (``added``, ``duplicates``) and a
  session posted twice is stored once;
- one append request is all or nothing;
- a partial (streaming) event is reported as not persisted, with no id.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.backfill import BackfillConfig, RayOptions, backfill
from mnemoray.backfill.archive import iter_archive
from mnemoray.backfill.commit import commit_chunk, make_chunk
from mnemoray.backfill.steps import distill_sessions, embed_sessions, validate_rows
from mnemoray.embedders.base import KEYWORD_ONLY_MODEL
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.http.metrics import Metrics
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import parquet_path
from mnemoray.memory.store.ops.merge import compact_store
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.writes import session_content_hash
from mnemoray.sessions.events import Event, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore, SessionStore
from mnemoray.sessions.types import DuplicateEventError
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import T0

APP, USER, SID = "app", "ana", "home"
KEY = "write-correctness-key-0123456789"
WHO = {"app_name": APP, "user_id": USER}
BERLIN = "I live in Berlin and I love the old bakery on my street."
VERSION_COLUMNS = ("session_events", "session_updated_at")
MOVED = "Big news: I moved to Madrid last week, my new flat is near the Retiro park."


# -- the two copies of one session ---------------------------------------------------
def _event(i: int, role: str, text: str, stamped: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "author": "user" if role == "user" else "assistant",
        "role": role,
        "type": "message",
        "text": text,
    }
    if stamped:
        out.update(id=f"e{i}", timestamp=T0 + 60 * i)
    return out


def older(stamped: bool = True) -> dict[str, Any]:
    """The session as archived first: the user lives in Berlin."""
    events = [
        _event(0, "user", BERLIN, stamped),
        _event(1, "model", "Berlin bakeries are wonderful.", stamped),
    ]
    raw: dict[str, Any] = {"app_name": APP, "user_id": USER, "session_id": SID, "events": events}
    if stamped:
        raw.update(created_at=T0, updated_at=T0 + 60)
    return raw


def newer(stamped: bool = True) -> dict[str, Any]:
    """The same session later: it grew, the user moved to Madrid."""
    raw = older(stamped)
    raw["events"] = raw["events"] + [
        _event(2, "user", MOVED, stamped),
        _event(3, "model", "Congratulations on Madrid!", stamped),
    ]
    if stamped:
        raw["updated_at"] = T0 + 180
    return raw


def summaries(store: Path) -> list[str]:
    """Texts of the session's live summary records."""
    service = MemoryService.open(store, embedder=None)
    rows, _ = service.list_memories(APP, USER, limit=1000)
    return [m.text for m in rows if m.session_id == SID and m.kind == "session_summary"]


def serves_madrid(store: Path) -> None:
    texts = summaries(store)
    assert len(texts) == 1, texts  # one current summary
    assert "Madrid" in texts[0], texts  # ... and it is the newer copy's
    hits = MemoryService.open(store, embedder=None).search(APP, USER, "Madrid flat Retiro")
    assert hits and any("Madrid" in h.memory.text for h in hits)


def write_archive(root: Path, *files: list[dict[str, Any]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(files):  # read in name order: part-0 before part-1
        (root / f"part-{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def run(archive: Path, store: Path, commit_every: int = 1) -> None:
    backfill(
        BackfillConfig(
            archive, store, embedder=None, commit_every=commit_every, progress_interval_s=0.0
        )
    )


# -- 1. an older copy never overwrites a newer one -------------------------------------
@pytest.mark.parametrize("stamped", [True, False], ids=["timestamps", "no-timestamps"])
@pytest.mark.parametrize("commit_every", [1, 10], ids=["separate-batches", "one-batch"])
def test_older_copy_read_later_does_not_replace_newer(
    tmp_path: Path, stamped: bool, commit_every: int
) -> None:
    archive = write_archive(tmp_path / "a", [newer(stamped)], [older(stamped)])
    run(archive, tmp_path / "store", commit_every)
    serves_madrid(tmp_path / "store")
    # The older copy is ledgered as processed: a re-run reads it and skips it.
    store = MemoryStore(tmp_path / "store")
    assert store.ledger_contains([session_content_hash(older(stamped))])


@pytest.mark.parametrize("commit_every", [1, 10], ids=["separate-batches", "one-batch"])
def test_newer_copy_read_later_replaces_older(tmp_path: Path, commit_every: int) -> None:
    archive = write_archive(tmp_path / "a", [older()], [newer()])
    run(archive, tmp_path / "store", commit_every)
    serves_madrid(tmp_path / "store")


def test_older_copy_in_a_later_run_does_not_replace_newer(tmp_path: Path) -> None:
    run(write_archive(tmp_path / "a1", [newer()]), tmp_path / "store")
    run(write_archive(tmp_path / "a2", [older()]), tmp_path / "store")
    serves_madrid(tmp_path / "store")


@pytest.mark.ray
@pytest.mark.parametrize("files", ["newer-first", "older-first"])
def test_ray_engine_keeps_the_newer_copy(tmp_path: Path, ray_cluster: None, files: str) -> None:
    from mnemoray.pipeline.backfill import RayDataEngine

    copies = [[newer()], [older()]] if files == "newer-first" else [[older()], [newer()]]
    config = BackfillConfig(
        write_archive(tmp_path / "a", *copies),
        tmp_path / "store",
        embedder=None,
        commit_every=1,
        progress_interval_s=0.0,
        ray=RayOptions(batch_size=1),
    )
    backfill(config, RayDataEngine())
    serves_madrid(tmp_path / "store")


def _chunk(store: MemoryStore, raw: dict[str, Any], tmp: Path) -> Any:
    """A chunk prepared the way a Ray worker prepares it (nothing committed)."""
    rows = list(iter_archive(write_archive(tmp, [raw])))
    items, bad = validate_rows(rows)
    assert not bad
    distilled, failed = distill_sessions(items, ExtractiveSummarizer())
    assert not failed
    return make_chunk(store, embed_sessions(distilled, None), KEYWORD_ONLY_MODEL, 0, {"read": 1})


@pytest.mark.parametrize("order", ["newer-first", "older-first"])
def test_commit_decides_by_version_not_by_commit_order(tmp_path: Path, order: str) -> None:
    # Both chunks are prepared before either commits (the Ray engine: workers prepare,
    # the driver commits), so the check must happen in commit_chunk.
    store = MemoryStore(tmp_path / "store", 2)
    new, old = _chunk(store, newer(), tmp_path / "n"), _chunk(store, older(), tmp_path / "o")
    for chunk in [new, old] if order == "newer-first" else [old, new]:
        commit_chunk(store, chunk, run_id="r", summarizer="extractive")
    serves_madrid(tmp_path / "store")
    assert store.ledger_contains(list(old.hashes) + list(new.hashes)) == {*old.hashes, *new.hashes}
    assert store.gc() == []  # the dropped rows' prepared files were not left behind


def test_online_ingestion_keeps_the_newer_copy(tmp_path: Path) -> None:
    service = MemoryService.open(tmp_path / "store", embedder=None)
    assert service.add_session(Session.from_dict(newer()))
    stale = Session.from_dict(older())
    assert service.add_session(stale) == []  # nothing written, nothing replaced
    assert service.store.ledger_contains([session_content_hash(stale)])  # processed
    serves_madrid(tmp_path / "store")


def test_http_older_copy_is_acknowledged_as_such(http: TestClient) -> None:
    first = http.post("/v1/memories", json={**WHO, "session": newer()})
    assert first.status_code == 201 and first.json()["status"] == "added", first.text
    stale = http.post("/v1/memories", json={**WHO, "session": older()})
    assert stale.status_code == 201, stale.text
    assert (stale.json()["added"], stale.json()["status"]) == (0, "older_copy")
    texts = [m["text"] for m in listed(http) if m["kind"] == "session_summary"]
    assert len(texts) == 1 and "Madrid" in texts[0]


def test_store_without_version_columns_still_loads_and_ingests(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    service = MemoryService.open(store_dir, embedder=None, shards=1)
    service.add_session(Session.from_dict(older()))
    store = MemoryStore(store_dir)
    for entry in store.manifest().segments[0]:  # rewrite as a pre-version store wrote it
        path = parquet_path(store_dir, 0, entry.name)
        table = pq.read_table(path)
        legacy = [c for c in VERSION_COLUMNS if c in table.column_names]
        assert legacy == list(VERSION_COLUMNS), table.column_names
        pq.write_table(table.drop_columns(legacy), path)
    assert "Berlin" in summaries(store_dir)[0]
    # An unknown stored version never blocks: the grown copy replaces it.
    service = MemoryService.open(store_dir, embedder=None)
    service.add_session(Session.from_dict(newer()))
    serves_madrid(store_dir)
    # Old and new segments side by side: duplicate checks scan both, compaction merges them.
    note = Memory(APP, USER, "online", "fact", "Ana is vegetarian.")
    assert len(service.add_memories([note])) == 1 and service.add_memories([note]) == []
    compact_store(MemoryStore(store_dir), max_segment_rows=1_000)
    serves_madrid(store_dir)
    assert service.store.manifest().segments[0][0].rows == len(
        MemoryService.open(store_dir, embedder=None).list_memories(APP, USER)[0]
    )


# -- 2. acknowledgements ------------------------------------------------------------------
class LocalBackend:
    """The routes over a real MemoryService and session store, without Ray."""

    def __init__(self, store: Path, sessions: SessionStore | None = None) -> None:
        self.metrics = Metrics(lambda: {})
        self.sessions = sessions or InMemorySessionStore()
        self.artifacts = InMemoryArtifactStore()
        self.ops = MemoryOps(MemoryService.open(store, embedder=None))

    async def recall(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
    ) -> dict[str, Any]:
        return self.ops.op_recall(app_name, user_id, query, top_k=top_k, filters=filters, mode=mode)

    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        return await self.run_io(self.ops.call, op, app_name, user_id, kwargs)

    async def run_io(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *args, **kwargs)
        )

    async def compile(self, *args: Any) -> dict[str, Any]:
        raise NotImplementedError

    def end_session(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        raise NotImplementedError


@pytest.fixture(params=["memory", "sqlite"])
def http(request: pytest.FixtureRequest, tmp_path: Path) -> TestClient:
    sessions = (
        InMemorySessionStore()
        if request.param == "memory"
        else SQLiteSessionStore(tmp_path / "sessions.db")
    )
    app = build_api(
        LocalBackend(tmp_path / "store", sessions),
        HttpConfig(keys=ApiKeys.from_mapping({KEY: APP})),
    )
    return TestClient(
        app, headers={"Authorization": f"Bearer {KEY}"}, raise_server_exceptions=False
    )


def listed(c: TestClient) -> list[dict[str, Any]]:
    r = c.get("/v1/memories", params={**WHO, "limit": 500})
    assert r.status_code == 200, r.text
    return r.json()["memories"]


def test_added_counts_only_rows_really_written(http: TestClient) -> None:
    body = {**WHO, "memories": [{"text": "Ana prefers window seats."}]}
    first = http.post("/v1/memories", json=body)
    assert first.status_code == 201, first.text
    assert (first.json()["added"], first.json()["duplicates"]) == (1, 0)
    again = http.post("/v1/memories", json=body)
    assert again.status_code == 201, again.text
    assert (again.json()["added"], again.json()["duplicates"]) == (0, 1)
    assert again.json()["memories"] == []
    both = http.post(
        "/v1/memories",
        json={
            **WHO,
            "memories": [{"text": "Ana prefers window seats."}, {"text": "Ana is vegetarian."}],
        },
    )
    assert (both.json()["added"], both.json()["duplicates"]) == (1, 1)
    assert [m["text"] for m in both.json()["memories"]] == ["Ana is vegetarian."]
    assert len(listed(http)) == 2


def test_service_add_memories_returns_only_new_records(tmp_path: Path) -> None:
    service = MemoryService.open(tmp_path / "store", embedder=None)
    m = Memory(APP, USER, "online", "fact", "Ana is vegetarian.")
    assert len(service.add_memories([m])) == 1
    assert service.add_memories([m]) == []
    assert service.add_memories([m, m]) == []


def test_same_session_posted_twice_is_stored_once(http: TestClient) -> None:
    raw = newer(stamped=False)  # no event ids, no timestamps: parsing fills both
    first = http.post("/v1/memories", json={**WHO, "session": raw})
    assert first.status_code == 201, first.text
    stored = listed(http)
    assert first.json()["added"] == len(stored) > 0
    again = http.post("/v1/memories", json={**WHO, "session": raw})
    assert again.status_code == 201, again.text
    assert again.json()["added"] == 0
    assert listed(http) == stored


def test_grown_session_posted_without_ids_keeps_one_copy_of_each_chunk(http: TestClient) -> None:
    assert http.post("/v1/memories", json={**WHO, "session": older(False)}).status_code == 201
    assert http.post("/v1/memories", json={**WHO, "session": newer(False)}).status_code == 201
    chunks = [m["text"] for m in listed(http) if m["kind"] == "chunk"]
    berlin = [t for t in chunks if "Berlin" in t]
    assert len(berlin) == 1, chunks  # the grown chunk replaced the first one


# -- 3. one append request is atomic ----------------------------------------------------------
@pytest.fixture(params=["memory", "sqlite"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    if request.param == "memory":
        return InMemorySessionStore()
    return SQLiteSessionStore(tmp_path / "sessions.db")


def test_append_events_is_all_or_nothing(sessions: SessionStore) -> None:
    s = sessions.create_session(APP, USER, "s1")
    sessions.append_events(s, [user_message("first", id="a")])
    batch = [
        user_message("second", id="b", state_delta={"k": 1}),
        user_message("third", id="a"),
    ]  # repeats an id already stored
    with pytest.raises(DuplicateEventError):
        sessions.append_events(s, batch)
    within = [user_message("x", id="c"), user_message("y", id="c")]  # repeats within the batch
    with pytest.raises(DuplicateEventError):
        sessions.append_events(s, within)
    stored = sessions.get_session(APP, USER, "s1")
    assert [e.id for e in stored.events] == ["a"] and stored.version == 1
    assert "k" not in stored.state
    assert [e.id for e in s.events] == ["a"] and s.version == 1  # the caller's copy too
    ok = sessions.append_events(s, [user_message("b", id="b"), user_message("c", id="c")])
    assert [e.id for e in ok] == ["b", "c"] and s.version == 3
    assert [e.id for e in sessions.get_session(APP, USER, "s1").events] == ["a", "b", "c"]


def test_http_append_with_a_repeated_id_persists_nothing(http: TestClient) -> None:
    assert http.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    events = [
        {"author": "user", "text": "one", "id": "dup"},
        {"author": "user", "text": "two", "id": "dup"},
    ]
    r = http.post("/v1/sessions/s1/events", json={**WHO, "events": events})
    assert r.status_code == 409, r.text
    got = http.get("/v1/sessions/s1", params=WHO).json()
    assert got["events"] == [] and got["version"] == 0


# -- 4. a partial event is not persisted, and says so -------------------------------------------
def test_http_partial_event_is_reported_not_persisted(http: TestClient) -> None:
    assert http.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    events = [
        {"author": "model", "role": "model", "text": "Hel", "partial": True},
        {"author": "model", "role": "model", "text": "Hello!"},
    ]
    r = http.post("/v1/sessions/s1/events", json={**WHO, "events": events})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["persisted"] == [False, True]
    assert body["event_ids"][0] is None  # no id for something that was never stored
    got = http.get("/v1/sessions/s1", params=WHO).json()
    assert [e["id"] for e in got["events"]] == [body["event_ids"][1]]
    assert got["version"] == body["version"] == 1


def test_partial_event_through_the_python_api_is_not_stored(sessions: SessionStore) -> None:
    s = sessions.create_session(APP, USER, "s1")
    out = sessions.append_events(s, [Event(author="m", role="model", text="Hel", partial=True)])
    assert out[0].partial and s.version == 0
    assert sessions.get_session(APP, USER, "s1").events == []
