"""MemoryStore on real Parquet, FAISS and manifest files in a temp directory."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mnemoray.errors import StoreCorrupt, StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.writes import session_content_hash
from mnemoray.sessions.events import user_message
from mnemoray.sessions.session import Session

DIM = 16
MODEL = "test-model"


def unit(rng: np.random.Generator, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def make(rng, app="app", user="u0", session="s0", n=1, start=0, kind="fact", **kw) -> list:
    return [
        Memory(
            app,
            user,
            session,
            kind,
            f"{app}/{user}/{session} note {start + i}",
            created_at=1000.0 + start + i,
            **kw,
        ).with_embedding(unit(rng))
        for i in range(n)
    ]


@pytest.fixture
def rng():
    return np.random.default_rng(3)


@pytest.fixture
def tenants(rng):
    """3 apps x 6 users with 1..12 memories each, written in two commits."""
    mems = []
    for a in range(3):
        for u in range(6):
            mems += make(rng, f"app{a}", f"user{u}", f"s{u % 2}", n=1 + (a * 7 + u * 5) % 12)
    return mems


def test_layout_on_disk(tmp_path, rng):
    store = MemoryStore(tmp_path / "store", shards=4)
    mems = make(rng, user="a", n=3) + make(rng, user="b", n=2)
    result = store.write_segment(mems, MODEL, DIM, session_hashes=["h1"], run_id="run-1")
    assert result.written == 5 and result.version == 1 and result.ledger_added == 1
    root = tmp_path / "store"
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["version"] == 1 and manifest["shards"] == 4
    assert manifest["embedding"] == {"model": MODEL, "dim": DIM}
    assert manifest["counts"]["rows"] == 5 and manifest["counts"]["ledger_sessions"] == 1
    for key, entries in manifest["segments"].items():
        for entry in entries:
            parquet = root / "memories" / f"shard={key}" / entry["parquet"]
            index = root / "index" / f"shard={key}" / entry["faiss"]
            assert parquet.is_file() and index.is_file()
            assert parquet.stem == index.stem == entry["name"]
            table = pq.read_table(parquet)
            assert table.num_rows == entry["rows"]
            vec_type = table.schema.field("embedding").type
            assert pa.types.is_fixed_size_list(vec_type) and vec_type.list_size == DIM
            assert vec_type.value_type == pa.float32()
            assert set(table["shard"].to_pylist()) == {int(key)}
    assert [p.name for p in (root / "ledger").iterdir()] == manifest["ledger"]
    assert not list(root.rglob("*.tmp"))
    assert shard_of("app", "a", 4) == shard_of("app", "a", 4)  # no per-process salt
    assert {m.shard for m in store.load().iter_memories()} == {shard_of("app", u, 4) for u in "ab"}


def test_uncommitted_segments_are_invisible_and_gc_removes_them(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    store.write_segment(make(rng, n=3), MODEL, DIM)
    # A writer that dies after writing its files but before the manifest rename:
    pending = store.prepare_segments(make(rng, user="late", n=4), MODEL, DIM)
    ledger_orphan = tmp_path / "ledger" / "ledger-orphan.parquet"
    ledger_orphan.parent.mkdir()
    pl.DataFrame({"session_hash": ["sess-late"], "run_id": ["r"], "added_at": [0.0]}).write_parquet(
        ledger_orphan
    )
    reopened = MemoryStore(tmp_path)
    assert reopened.load().count() == 3 and reopened.load().version == 1
    assert reopened.ledger_contains(["sess-late"]) == set()
    removed = reopened.gc()
    names = {p.name for p in removed}
    assert ledger_orphan.name in names
    assert (
        sum(n.endswith(".parquet") for n in names) == 2
        and sum(n.endswith(".faiss") for n in names) == 1
    )
    assert reopened.load().count() == 3
    assert reopened.gc() == []
    with pytest.raises(StoreError, match="missing"):
        store.commit(pending)


def test_two_phase_commit_drops_rows_committed_meanwhile(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    shared = make(rng, user="x", n=3)
    first = store.prepare_segments(shared + make(rng, user="y", n=2), MODEL, DIM)
    second = store.prepare_segments(shared + make(rng, user="z", n=2), MODEL, DIM)
    assert store.commit(first, session_hashes=["a"]).written == 5
    result = store.commit(second, session_hashes=["a", "b"])
    assert (result.written, result.skipped, result.ledger_added) == (2, 3, 1)
    snap = store.load()
    assert snap.count() == 7 and len(snap.rows_for_user("app", "x")) == 3
    assert store.gc() == []  # commit already removed the superseded prepared files
    assert MemoryStore(tmp_path).load().count() == 7


def test_idempotent_rewrite(tmp_path, rng, tenants):
    store = MemoryStore(tmp_path)
    first = store.write_segment(tenants, MODEL, DIM)
    again = store.write_segment(tenants, MODEL, DIM)
    assert (again.written, again.skipped, again.version) == (0, len(tenants), first.version)
    doubled = store.write_segment(tenants[:5] + tenants[:5], MODEL, DIM)
    assert doubled.written == 0 and doubled.skipped == 10
    assert store.load().count() == len(tenants)
    clash = Memory("app0", "user0", "s0", "fact", "other text", memory_id=tenants[0].memory_id)
    with pytest.raises(StoreError, match="different content"):
        store.write_segment([clash.with_embedding(unit(rng))], MODEL, DIM)


def test_rows_sorted_and_user_search_exact(tmp_path, rng, tenants):
    store = MemoryStore(tmp_path, shards=3)
    half = len(tenants) // 2
    store.write_segment(tenants[:half], MODEL, DIM)
    store.write_segment(tenants[half:], MODEL, DIM)
    snap = store.load()
    for segs in snap.segments:
        for seg in segs:
            keys = list(
                zip(*(seg.table[c].to_pylist() for c in ("app_name", "user_id")), strict=True)
            )
            assert keys == sorted(keys)
    assert snap.count() == len(tenants)
    by_id = {m.memory_id: m for m in tenants}
    for app, user in [("app0", "user1"), ("app2", "user5"), ("app1", "user3")]:
        mine = [m for m in tenants if (m.app_name, m.user_id) == (app, user)]
        assert {m.memory_id for m in snap.rows_for_user(app, user)} == {m.memory_id for m in mine}
        q = unit(rng)
        hits = snap.search_user(app, user, q, k=5)
        truth = sorted(mine, key=lambda m: -float(m.embedding @ q))[:5]
        assert [h.memory.memory_id for h in hits] == [m.memory_id for m in truth]
        for h in hits:
            assert h.score == pytest.approx(
                float(by_id[h.memory.memory_id].embedding @ q), abs=1e-5
            )
    facts_in_s1 = snap.search_user(
        "app0",
        "user1",
        unit(rng),
        k=50,
        mask_fn=lambda t: pc.equal(t["session_id"], "s1").to_numpy(zero_copy_only=False),
    )
    assert facts_in_s1 and all(h.memory.session_id == "s1" for h in facts_in_s1)
    assert snap.search_user("app0", "nobody", unit(rng)) == []


def test_app_search_with_hnsw_segments(tmp_path):
    rng = np.random.default_rng(11)
    store = MemoryStore(tmp_path, shards=2)
    mems = [
        Memory("big", f"u{i % 40}", "s", "chunk", f"chunk {i}", created_at=float(i)).with_embedding(
            unit(rng, 32)
        )
        for i in range(3000)
    ]
    mems += [
        Memory("other", "u0", "s", "chunk", f"other {i}").with_embedding(unit(rng, 32))
        for i in range(300)
    ]
    store.write_segment(mems, MODEL, 32, index_kind="hnsw")
    snap = store.load()
    assert {seg.entry.index for segs in snap.segments for seg in segs} == {"hnsw"}
    queries = [unit(rng, 32) for _ in range(20)]
    exact = [[h.memory.memory_id for h in snap.search_app("big", q, k=10)] for q in queries]
    snap.exact_max_rows = 0  # force the ANN path
    recall = []
    for q, truth in zip(queries, exact, strict=True):
        hits = snap.search_app("big", q, k=10)
        assert all(h.memory.app_name == "big" for h in hits)
        recall.append(len({h.memory.memory_id for h in hits} & set(truth)) / 10)
    assert np.mean(recall) >= 0.95


def test_forget_survives_reload(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    a1 = make(rng, user="a", session="s1", n=3)
    a2 = make(rng, user="a", session="s2", n=2, start=10)
    b = make(rng, user="b", session="s1", n=4)
    store.write_segment(a1 + a2 + b, MODEL, DIM)
    assert store.forget(memory_ids=[a1[0].memory_id], owner=("app", "b")) == 0  # not b's
    assert store.forget(memory_ids=[a1[0].memory_id, "no-such-id"], owner=("app", "a")) == 1
    assert store.forget(session=("app", "a", "s2")) == 2
    assert store.forget(owned=[("app", "a", a1[0].memory_id)]) == 0  # already gone: no new version
    snap = MemoryStore(tmp_path).load()
    assert {m.memory_id for m in snap.rows_for_user("app", "a")} == {m.memory_id for m in a1[1:]}
    assert snap.get(a1[0].memory_id) is None and snap.get(a1[1].memory_id) is not None
    hits = snap.search_user("app", "a", a1[0].embedding, k=10)
    assert a1[0].memory_id not in {h.memory.memory_id for h in hits}
    assert store.forget(user=("app", "b")) == 4
    reloaded = MemoryStore(tmp_path).load()
    assert reloaded.count() == 2 and reloaded.count("app", "b") == 0
    assert all(h.memory.user_id != "b" for h in reloaded.search_app("app", b[0].embedding, 10))
    # Re-running the backfill does not resurrect, new sessions of the user do show.
    store.write_segment(b, MODEL, DIM)
    later = make(rng, user="b", session="s9", n=1, start=50)
    store.write_segment(later, MODEL, DIM)
    assert [m.memory_id for m in store.load().rows_for_user("app", "b")] == [later[0].memory_id]
    with pytest.raises(StoreError, match="memory_ids"):
        store.forget(memory_ids="abc", owner=("app", "a"))
    with pytest.raises(StoreError, match="owner"):
        store.forget(memory_ids=["abc"])  # an id without its owner is ambiguous
    with pytest.raises(StoreError, match=r"owned\[0\]"):
        store.forget(owned=[("app", "a")])
    with pytest.raises(StoreError, match="session"):
        store.forget(session=("app", "a"))
    with pytest.raises(StoreError, match="forget"):
        store.forget()


def test_ttl(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=1)
    now = time.time()
    gone = make(rng, user="t", n=2, expires_at=now - 1)
    soon = make(rng, user="t", n=1, start=5, expires_at=now + 3600)
    forever = make(rng, user="t", n=1, start=9)
    store.write_segment(gone + soon + forever, MODEL, DIM)
    snap = store.load()
    live = {m.memory_id for m in soon + forever}
    assert {m.memory_id for m in snap.rows_for_user("app", "t")} == live
    assert snap.count() == 2 and snap.get(gone[0].memory_id) is None
    assert {h.memory.memory_id for h in snap.search_user("app", "t", gone[0].embedding)} == live
    assert {h.memory.memory_id for h in snap.search_app("app", gone[0].embedding)} == live
    assert snap.count(now=now + 7200) == 1


def test_tenant_isolation(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=1)  # one shard: tenants share every segment
    alice = make(rng, "shop", "alice", n=20)
    bob = make(rng, "shop", "bob", n=20)
    alice_elsewhere = make(rng, "bank", "alice", n=20)
    store.write_segment(alice + bob + alice_elsewhere, MODEL, DIM)
    snap = store.load()
    for m in alice:
        hits = snap.search_user("shop", "bob", m.embedding, k=40)
        assert len(hits) == 20 and {h.memory.user_id for h in hits} == {"bob"}
        assert {h.memory.app_name for h in snap.search_app("bank", m.embedding, k=40)} == {"bank"}
    assert {m.app_name for m in snap.iter_memories(app="shop")} == {"shop"}
    assert len(list(snap.iter_memories("bank", "alice"))) == 20
    assert snap.rows_for_user("shop", "carol") == []
    with pytest.raises(StoreError, match="app"):
        list(snap.iter_memories(user="alice"))


def test_export_import_lossless(tmp_path, rng, tenants):
    src = MemoryStore(tmp_path / "a", shards=4)
    src.write_segment(tenants[:40], MODEL, DIM, summarizer="extractive-v1")
    src.add(tenants[40:])
    src.forget(user=("app1", "user2"))
    first = tmp_path / "first.jsonl"
    count = src.export_jsonl(first)
    assert count == src.load().count()
    dst = MemoryStore(tmp_path / "b", shards=4)
    result = dst.import_jsonl(first, batch_size=25)
    assert result.written == count and dst.manifest().summarizer == "extractive-v1"
    second = tmp_path / "second.jsonl"
    dst.export_jsonl(second)
    lines = first.read_text().splitlines()
    assert lines == second.read_text().splitlines()
    assert json.loads(lines[0])["count"] == len(lines) - 1
    row = json.loads(lines[1])
    assert row["type"] == "memory" and "entities" in row and "topics" in row
    a, b = src.load(), dst.load()
    for m in a.iter_memories():
        other = b.get(m.memory_id)
        assert other == m  # every field but the embedding...
        assert other.embedding.view(np.uint32).tobytes() == m.embedding.view(np.uint32).tobytes()
    assert dst.import_jsonl(first).written == 0  # idempotent
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n" + '{"type": "memory", "app_name": ""}\n')
    with pytest.raises(StoreError, match="bad.jsonl:2"):
        dst.import_jsonl(bad)


def test_quarantine(tmp_path):
    store = MemoryStore(tmp_path)
    rows = [
        {"location": "a.jsonl:3", "reason": "events[0].role: bad", "raw": {"x": 1}},
        {"location": "a.jsonl:9", "reason": "invalid JSON", "raw": "{oops"},
    ]
    assert store.quarantine(rows) == 2 and store.quarantine_count() == 2
    store.quarantine(rows)  # a rerun quarantines the same rows again
    assert store.quarantine_count() == 2
    store.quarantine([{"location": "b.parquet:0", "reason": "x", "raw": b"\x00"}])
    assert store.quarantine_count() == 3
    assert store.read_quarantine()[0]["reason"] == "events[0].role: bad"
    with pytest.raises(StoreError, match="reason"):
        store.quarantine([{"location": "x", "raw": 1}])
    assert store.quarantine([]) == 0


def test_ledger(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    assert store.ledger_contains(["h1"]) == set()
    store.write_segment(make(rng, n=2), MODEL, DIM, session_hashes=["h1", "h2"], run_id="r1")
    assert store.ledger_add(["h2", "h3", "h3"], run_id="r2") == 1  # h2 known, h3 once
    assert store.ledger_contains(["h1", "h3", "h4"]) == {"h1", "h3"}
    assert store.manifest().ledger_sessions == 3
    assert store.ledger_add(["h1"]) == 0
    with pytest.raises(StoreError, match="session_hashes"):
        store.ledger_contains("h1")
    frame = pl.read_parquet(tmp_path / "ledger")
    assert sorted(frame["session_hash"].to_list()) == ["h1", "h2", "h3"]


def test_session_content_hash():
    session = Session(
        "app", "u", "s1", events=[user_message("hi", id="e1", timestamp=5.0)], created_at=1.0
    )
    raw = session.to_dict()
    assert session_content_hash(session) == session_content_hash(raw)
    assert session_content_hash(dict(reversed(list(raw.items())))) == session_content_hash(raw)
    assert session_content_hash({**raw, "state": {"k": 1}}) != session_content_hash(raw)
    assert session_content_hash({"events": np.array([1, 2])}) == session_content_hash(
        {"events": [1, 2]}
    )
    with pytest.raises(StoreError, match="session"):
        session_content_hash({"x": object()})


def test_keyword_only_store(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    mems = [Memory("app", "u", "s", "chunk", f"plain text {i}") for i in range(5)]
    assert store.write_segment(mems, "none", 0).written == 5
    assert not list((tmp_path / "index").rglob("*.faiss"))
    snap = MemoryStore(tmp_path).load()
    assert snap.manifest.keyword_only and snap.count() == 5
    assert [m.text for m in snap.rows_for_user("app", "u")] == [m.text for m in mems]
    assert all(m.embedding is None for m in snap.iter_memories())
    with pytest.raises(StoreError, match="no embeddings"):
        snap.search_user("app", "u", unit(rng))
    with pytest.raises(StoreError, match="keyword-only"):
        store.write_segment(make(rng), "none", 0)
    with pytest.raises(StoreError, match="store uses 'none'"):
        store.write_segment(make(rng), MODEL, DIM)
    assert store.add([Memory("app", "u", "s", "fact", "added later")]).written == 1
    assert (
        store.forget(memory_ids=[mems[0].memory_id], owner=(mems[0].app_name, mems[0].user_id)) == 1
    )
    assert MemoryStore(tmp_path).load().count() == 5


def test_write_errors_are_named(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    store.write_segment(make(rng), MODEL, DIM)
    with pytest.raises(StoreError, match="store uses 'test-model'"):
        store.write_segment(make(rng, user="v"), "other-model", DIM)
    with pytest.raises(StoreError, match="no embedding"):
        store.write_segment([Memory("app", "u", "s", "fact", "bare")], MODEL, DIM)
    unnormalised = Memory("app", "u", "s", "fact", "big").with_embedding(np.ones(DIM))
    with pytest.raises(StoreError, match="norm"):
        store.write_segment([unnormalised], MODEL, DIM)
    with pytest.raises(StoreError, match="shape"):
        store.write_segment(
            [Memory("app", "u", "s", "fact", "x").with_embedding(unit(rng, 8))], MODEL, DIM
        )
    with pytest.raises(StoreError, match=r"memories\[0\]"):
        store.write_segment([{"text": "dict"}], MODEL, DIM)
    with pytest.raises(StoreError, match="keyword-only store is 'none' with dim 0"):
        store.write_segment([], "none", 4)
    with pytest.raises(StoreError, match="index_kind"):
        store.write_segment(make(rng, user="w"), MODEL, DIM, index_kind="annoy")
    assert not list(tmp_path.rglob("*.tmp"))
    with pytest.raises(StoreError, match="2 shards"):
        MemoryStore(tmp_path, shards=8)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(StoreCorrupt, match="manifest"):  # a damaged store, not bad input
        MemoryStore(tmp_path)


def test_ivf_segment_and_snapshot_reuse(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=1)
    mems = make(rng, user="i", n=200)
    store.write_segment(mems, MODEL, DIM, index_kind="ivf")
    first = store.load()
    assert store.load() is first  # same manifest version: same snapshot
    seg = first.segments[0][0]
    assert seg.entry.index == "ivf" and seg.vectors.shape == (200, DIM)
    q = unit(rng)
    truth = sorted(mems, key=lambda m: -float(m.embedding @ q))[:3]
    assert [h.memory.memory_id for h in first.search_user("app", "i", q, 3)] == [
        m.memory_id for m in truth
    ]
    store.add(make(rng, user="j", n=2))
    second = store.load()
    assert second is not first and second.segments[0][0] is seg  # old segment reused
    assert second.count() == 202 and first.count() == 200


def test_reopen_takes_shards_from_manifest(tmp_path: Path, rng):
    MemoryStore(tmp_path, shards=5).write_segment(make(rng), MODEL, DIM)
    assert MemoryStore(tmp_path).shards == 5
    assert MemoryStore(tmp_path / "new").shards == 8


def test_concurrent_writers_both_commit(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=2)
    batches = [make(rng, user=f"w{i}", n=20) for i in range(4)]
    results: list = []
    threads = [
        threading.Thread(
            target=lambda b=b: results.append(
                MemoryStore(tmp_path).write_segment(b, MODEL, DIM, session_hashes=[b[0].user_id])
            )
        )
        for b in batches
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.version for r in results) == [1, 2, 3, 4]
    assert store.load().count() == 80
    assert store.ledger_contains(["w0", "w1", "w2", "w3"]) == {"w0", "w1", "w2", "w3"}


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_a_writer_reads_its_segments_without_reading_them_back(tmp_path, rng, monkeypatch, kind):
    """The next snapshot takes what the write kept in memory; another process reads the
    files and gets the same rows, vectors and scores, bit for bit."""
    from mnemoray.memory.store.segment import LoadedSegment

    mems = make(rng, user="w", n=300 if kind != "flat" else 5)
    writer = MemoryStore(tmp_path, shards=1)
    writer.write_segment(mems[:-1], MODEL, DIM, index_kind=kind)
    result = writer.write_segment(mems[-1:], MODEL, DIM, index_kind=kind)
    assert writer.written_hashes(result) == {mems[-1].content_hash}

    def no_reads(*args, **kwargs):
        raise AssertionError("a written segment was read back")

    with monkeypatch.context() as patched:
        patched.setattr(LoadedSegment, "load", no_reads)
        mine = writer.load()
    theirs = MemoryStore(tmp_path).load()
    q = unit(rng)
    for a, b in zip(mine.segments[0], theirs.segments[0], strict=True):
        assert a.entry == b.entry and a.table.equals(b.table)
        assert np.array_equal(a.vectors, b.vectors)
    hits = [(h.memory.memory_id, h.score) for h in mine.search_user("app", "w", q, 10)]
    assert hits == [(h.memory.memory_id, h.score) for h in theirs.search_user("app", "w", q, 10)]


def test_small_segments_are_written_uncompressed_and_larger_ones_with_zstd(tmp_path, rng):
    from mnemoray.memory.store.layout import parquet_path
    from mnemoray.memory.store.segment import UNCOMPRESSED_ROWS

    store = MemoryStore(tmp_path, shards=1)
    for n in (1, UNCOMPRESSED_ROWS):
        name = store.write_segment(make(rng, user=f"n{n}", n=n), MODEL, DIM).segments[0]
        meta = pq.ParquetFile(parquet_path(tmp_path, 0, name)).metadata
        codec = meta.row_group(0).column(0).compression
        assert codec == ("UNCOMPRESSED" if n < UNCOMPRESSED_ROWS else "ZSTD")


def test_a_refused_batch_writes_no_file(tmp_path, rng):
    store = MemoryStore(tmp_path, shards=4)
    [held] = make(rng, user="u0")
    store.write_segment([held], MODEL, DIM)
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    others = [m for u in range(1, 12) for m in make(rng, user=f"u{u}")]
    clash = Memory("app", "u0", "s0", "fact", "other text", memory_id=held.memory_id)
    # Shards are written in order: some of the others' come before the clash's.
    assert min(shard_of("app", m.user_id, 4) for m in others) < shard_of("app", "u0", 4)
    with pytest.raises(StoreError, match="different content"):
        store.write_segment([*others, clash.with_embedding(unit(rng))], MODEL, DIM)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == files
