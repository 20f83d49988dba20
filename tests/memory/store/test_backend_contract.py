"""The store contract, written once and run against every MemoryBackend (Parquet + FAISS,
LanceDB): writes and the ledger, tenant isolation, filters, forget, TTL, export/import,
and recall through MemoryService. Real stores in temp directories, the real embedder."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mnemoray.embedders import open_embedder
from mnemoray.errors import StoreError
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.protocol import MemoryBackend, open_backend
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import DAY, FLYING, T0, parrot, session
from tests.support.store_contract import (
    BACKENDS,
    DIM,
    MODEL,
    location,
    make,
    new_rng,
    store_opener,
    unit,
)


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path):
    """Opens stores of one backend in tmp_path: each test using it runs once per backend."""
    return store_opener(request.param, tmp_path)


@pytest.fixture
def rng() -> np.random.Generator:
    return new_rng()


@pytest.fixture(scope="module")
def embedder():
    return open_embedder("default")


def service_on(store: MemoryBackend, embedder) -> MemoryService:
    return MemoryService(store, embedder, ExtractiveSummarizer())


# -- writes, two-phase commit, ledger -------------------------------------------------
def test_write_read_back_and_written_hashes(open_store, rng) -> None:
    store = open_store()
    assert isinstance(store, MemoryBackend) and store.manifest().version == 0
    a = make(rng, user="a", n=3)
    b = make(rng, user="b", n=2, start=5)
    result = store.write_segment(
        b + a, MODEL, DIM, session_hashes=["h1"], run_id="r1", summarizer="extractive-v1"
    )
    assert (result.written, result.skipped, result.ledger_added) == (5, 0, 1)
    assert store.written_hashes(result) == {m.content_hash for m in a + b}
    m = store.manifest()
    assert (m.version, m.embedding_model, m.dim, m.summarizer) == (1, MODEL, DIM, "extractive-v1")
    view = open_backend(store.uri).load()  # reopened by its location, as a worker does
    assert view.version == 1 and view.count() == 5 and view.count("app", "a") == 3
    assert [x.memory_id for x in view.rows_for_user("app", "a")] == [x.memory_id for x in a]
    got = view.get(a[1].memory_id, ("app", "a"))
    # Every field but the shard the store put it in, the embedding bit for bit.
    assert replace(got, shard=-1) == a[1] and np.array_equal(got.embedding, a[1].embedding)
    assert view.get(a[1].memory_id, ("app", "b")) is None  # ids are unique per owner only
    assert view.tenants() == [("app", "a"), ("app", "b")]


def test_two_phase_commit_skips_rows_committed_meanwhile(open_store, rng) -> None:
    store = open_store()
    shared = make(rng, user="x", n=3)
    first = store.prepare_segments(shared + make(rng, user="y", n=2), MODEL, DIM)
    second = store.prepare_segments(shared + make(rng, user="z", n=2), MODEL, DIM)
    assert store.load().count() == 0  # prepared is invisible
    assert first.segment_count >= 1
    assert store.commit(first, session_hashes=["a"]).written == 5
    result = store.commit(second, session_hashes=["a", "b"])
    assert (result.written, result.skipped, result.ledger_added) == (2, 3, 1)
    assert store.load().count() == 7


def test_idempotent_rewrite_and_id_clash(open_store, rng) -> None:
    store = open_store()
    mems = make(rng, user="a", n=4) + make(rng, user="b", n=3)
    first = store.write_segment(mems, MODEL, DIM)
    again = store.write_segment(mems, MODEL, DIM)
    assert (again.written, again.skipped, again.version) == (0, 7, first.version)
    assert store.write_segment(mems[:2] + mems[:2], MODEL, DIM).skipped == 4
    clash = Memory("app", "a", "s0", "fact", "other text", memory_id=mems[0].memory_id)
    with pytest.raises(StoreError, match="different content"):
        store.write_segment([clash.with_embedding(unit(rng))], MODEL, DIM)
    with pytest.raises(StoreError, match="embedding_model"):
        store.write_segment(make(rng, user="c"), "other-model", DIM)
    bad = Memory("app", "c", "s0", "fact", "x").with_embedding(np.ones(DIM, np.float32))
    with pytest.raises(StoreError, match="normalised"):
        store.write_segment([bad], MODEL, DIM)
    assert store.load().count() == 7


def test_ledger(open_store, rng) -> None:
    store = open_store()
    assert store.ledger_contains(["h1"]) == set()
    store.write_segment(make(rng, n=2), MODEL, DIM, session_hashes=["h1", "h2"], run_id="r1")
    assert store.ledger_add(["h2", "h3", "h3"], run_id="r2") == 1  # h2 known, h3 once
    assert store.ledger_contains(["h1", "h3", "h4"]) == {"h1", "h3"}
    assert store.manifest().ledger_sessions == 3
    assert store.ledger_add(["h1"]) == 0
    with pytest.raises(StoreError, match="session_hashes"):
        store.ledger_contains("h1")


def test_sessions_with_rows_and_drop_sessions(open_store, rng) -> None:
    store = open_store()
    store.write_segment(make(rng, user="a", session="s1", n=2), MODEL, DIM)
    keys = {("app", "a", "s1"), ("app", "a", "s2"), ("app", "b", "s1")}
    assert store.sessions_with_rows(keys) == {("app", "a", "s1")}
    pending = store.prepare_segments(
        make(rng, user="a", session="s2", n=2, start=9)
        + make(rng, user="a", session="s3", n=1, start=20),
        MODEL,
        DIM,
    )
    kept = store.drop_sessions(pending, {("app", "a", "s2")})
    result = store.commit(kept)
    assert (result.written, result.skipped) == (1, 2)
    assert {m.session_id for m in store.load().rows_for_user("app", "a")} == {"s1", "s3"}


# -- isolation, TTL, forget --------------------------------------------------------------
def test_tenant_isolation(open_store, rng) -> None:
    store = open_store()
    alice, bob = make(rng, "shop", "alice", n=12), make(rng, "shop", "bob", n=12)
    elsewhere = make(rng, "bank", "alice", n=12)
    store.write_segment(alice + bob + elsewhere, MODEL, DIM)
    view = store.load()
    for m in alice[:4]:
        assert {h.memory.app_name for h in view.search_app("bank", m.embedding, k=40)} == {"bank"}
    assert {x.user_id for x in view.rows_for_user("shop", "bob")} == {"bob"}
    assert {x.app_name for x in view.iter_memories(app="shop")} == {"shop"}
    assert len(list(view.iter_memories("bank", "alice"))) == 12
    assert view.rows_for_user("shop", "carol") == [] and view.count("shop", "carol") == 0
    with pytest.raises(StoreError, match="app"):
        view.count(user="alice")


def test_ttl(open_store, rng) -> None:
    store = open_store()
    now = time.time()
    gone = make(rng, user="t", n=2, expires_at=now - 1)
    soon = make(rng, user="t", n=1, start=5, expires_at=now + 3600)
    forever = make(rng, user="t", n=1, start=9)
    store.write_segment(gone + soon + forever, MODEL, DIM)
    view = store.load()
    live = {m.memory_id for m in soon + forever}
    assert {m.memory_id for m in view.rows_for_user("app", "t")} == live
    assert view.count() == 2 and view.get(gone[0].memory_id, ("app", "t")) is None
    assert {h.memory.memory_id for h in view.search_app("app", gone[0].embedding)} == live
    assert view.count(now=now + 7200) == 1


def test_forget_by_id_session_user(open_store, rng) -> None:
    store = open_store()
    a1 = make(rng, user="a", session="s1", n=3)
    a2 = make(rng, user="a", session="s2", n=2, start=10)
    b = make(rng, user="b", session="s1", n=4)
    store.write_segment(a1 + a2 + b, MODEL, DIM)
    assert store.forget(memory_ids=[a1[0].memory_id], owner=("app", "b")) == 0  # not b's
    assert (
        store.forget(
            memory_ids=[a1[0].memory_id, "no-such-id"],
            owner=("app", "a"),
            reason="asked",
            actor="alice",
        )
        == 1
    )
    assert store.forget(session=("app", "a", "s2")) == 2
    assert store.forget(owned=[("app", "a", a1[0].memory_id)]) == 0  # already gone
    view = open_backend(store.uri).load()
    assert {m.memory_id for m in view.rows_for_user("app", "a")} == {m.memory_id for m in a1[1:]}
    assert view.get(a1[0].memory_id, ("app", "a")) is None
    records = [t for t in view.tombstones if t.user_id == "a"]
    assert [(t.scope, t.reason, t.actor) for t in records][:1] == [("memory", "asked", "alice")]
    assert store.forget(user=("app", "b")) == 4
    view = store.load()
    assert view.count() == 2 and view.count("app", "b") == 0
    assert all(h.memory.user_id != "b" for h in view.search_app("app", b[0].embedding, 10))
    later = make(rng, user="b", session="s9", n=1, start=50)  # a later session shows
    store.write_segment(later, MODEL, DIM)
    assert [m.memory_id for m in store.load().rows_for_user("app", "b")] == [later[0].memory_id]
    with pytest.raises(StoreError, match="owner"):
        store.forget(memory_ids=["abc"])
    with pytest.raises(StoreError, match="forget"):
        store.forget()


# -- export / import ---------------------------------------------------------------------
@pytest.mark.parametrize("target", BACKENDS)
def test_export_import_lossless_across_backends(
    open_store, rng, tmp_path: Path, target: str
) -> None:
    src = open_store("src")
    mems = [m for u in range(4) for m in make(rng, "app", f"u{u}", n=3 + u, start=u * 10)]
    src.write_segment(mems, MODEL, DIM, summarizer="extractive-v1")
    src.forget(user=("app", "u1"))
    first = tmp_path / "first.jsonl"
    count = src.export_jsonl(first)
    assert count == src.load().count() == len(mems) - 4
    dst = open_backend(location(target, tmp_path / "dst"))
    result = dst.import_jsonl(first, batch_size=5)
    assert result.written == count and dst.manifest().summarizer == "extractive-v1"
    second = tmp_path / "second.jsonl"
    dst.export_jsonl(second)

    def lines(path: Path) -> list[dict]:  # the shard count is the store's own layout
        return [
            {k: v for k, v in json.loads(x).items() if k not in ("shard", "shards")}
            for x in path.read_text().splitlines()
        ]

    assert lines(first) == lines(second)
    assert json.loads(first.read_text().splitlines()[0])["count"] == count
    a, b = src.load(), dst.load()
    for m in a.iter_memories():
        other = b.get(m.memory_id, (m.app_name, m.user_id))
        assert replace(other, shard=m.shard) == m
        assert np.array_equal(other.embedding, m.embedding)
    assert dst.import_jsonl(first).written == 0  # idempotent


# -- recall through MemoryService ----------------------------------------------------
def test_recall_filters_forget_and_reingest_through_the_service(open_store, embedder) -> None:
    svc = service_on(open_store(), embedder)
    cooking = session(
        "cooking",
        T0 + 3 * DAY,
        ("u", "How long should I roast a chicken?"),
        ("m", "Roast it at 220C for about 75 minutes."),
    )
    for s in (parrot(), cooking, parrot(user="bob")):
        assert svc.add_session(s)
    assert svc.add_session(parrot()) == []  # the ledger holds it: nothing re-ingested
    hits = svc.search("app", "alice", FLYING, top_k=5)
    assert hits[0].memory.session_id == "parrot"
    assert {h.memory.user_id for h in hits} == {"alice"}
    only = svc.search("app", "alice", FLYING, top_k=5, filters={"session_id": "cooking"})
    assert only and {h.memory.session_id for h in only} == {"cooking"}
    kinds = svc.search("app", "alice", FLYING, filters={"kinds": ["session_summary"]})
    assert kinds and {h.memory.kind for h in kinds} == {"session_summary"}
    early = svc.search("app", "alice", FLYING, filters={"before": T0 + DAY})
    assert early and {h.memory.session_id for h in early} == {"parrot"}
    late = svc.search_app("app", FLYING, top_k=10, filters={"after": T0 + 2 * DAY})
    assert late and {h.memory.session_id for h in late} == {"cooking"}
    assert {h.memory.user_id for h in svc.search_app("app", FLYING, top_k=10)} == {"alice", "bob"}
    n = svc.forget_session("app", "alice", "parrot", reason="asked", actor="alice")
    assert n > 0 and all(
        h.memory.session_id != "parrot" for h in svc.search("app", "alice", FLYING, top_k=10)
    )
    assert svc.forgotten("app", "alice")[-1]["reason"] == "asked"
    assert svc.add_session(parrot()) == []  # ledgered: a forgotten session is not revived
    assert svc.forget_user("app", "bob") > 0 and svc.search("app", "bob", FLYING) == []
    svc.close()


def test_both_backends_rank_the_same(tmp_path: Path, embedder) -> None:
    """The same sessions give the same recall (ids and scores) on every backend, the
    graph axis aside: it is the Parquet store's alone (LanceDB keeps no entity graph)."""
    sessions = [
        parrot(),
        parrot(user="bob"),
        session(
            "cooking",
            T0 + 3 * DAY,
            ("u", "Roast chicken, crispy skin?"),
            ("m", "220C for 75 minutes; dry the skin first."),
        ),
        session(
            "birds",
            T0 + 5 * DAY,
            ("u", "Do cockatoos talk like parrots do?"),
            ("m", "Some do, but African greys are the best talkers."),
        ),
    ]
    # The entity axis asks the graph too, where there is one; these queries name no
    # entity it knows, so both backends rank them by the words of the records' entities.
    no_graph = RetrievalConfig(weights={"graph": 0})
    answers = []
    graph_axis = []
    for kind in BACKENDS:
        svc = MemoryService(
            open_backend(location(kind, tmp_path / kind)),
            embedder,
            ExtractiveSummarizer(),
            no_graph,
        )
        for s in sessions:
            svc.add_session(s)
        user = [
            (r.memory.memory_id, round(r.score, 5), r.signals.get("dense_rank"))
            for r in svc.search("app", "alice", FLYING, top_k=6)
        ]
        app = [
            (r.memory.memory_id, round(r.score, 5))
            for r in svc.search_app("app", "a talking bird", top_k=6)
        ]
        keyword = [r.memory.memory_id for r in svc.search("app", "alice", "parrot", mode="keyword")]
        answers.append((user, app, keyword))
        svc.close()
        plain = service_on(open_backend(location(kind, tmp_path / kind)), embedder)
        hits = plain.search("app", "alice", FLYING, top_k=6)
        graph_axis.append(bool(hits) and all("graph" in r.signals for r in hits))
        plain.close()
    assert answers[0] == answers[1] and answers[0][0] and answers[0][1]
    assert graph_axis == [kind == "parquet" for kind in BACKENDS]
