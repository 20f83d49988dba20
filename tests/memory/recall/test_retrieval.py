"""Hybrid retrieval: fusion math, filters, and the Retriever over a real store (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from mnemoray.memory.recall.candidates import EntityIndex
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.fusion import freshness, fuse, rank_desc, top_positions
from mnemoray.memory.recall.retriever import Retriever
from mnemoray.memory.records.filters import RecallFilters, RetrievalError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.parquet.store import MemoryStore
from tests.support.factories import DAY, T0

DIM = 16
MODEL = "test-model"


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def axis(i: int, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """A vector near basis axis ``i``: cosine to axis(i) ~ 1 - noise."""
    rng = np.random.default_rng(seed)
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return unit(v + noise * rng.standard_normal(DIM).astype(np.float32))


def mem(
    text: str,
    vec: np.ndarray | None,
    *,
    app: str = "app",
    user: str = "alice",
    session: str = "s1",
    kind: str = "fact",
    t: float = T0,
    **kw,
) -> Memory:
    m = Memory(
        app,
        user,
        session,
        kind,
        text,
        event_time_start=t,
        event_time_end=t,
        created_at=kw.pop("created_at", t),
        **kw,
    )
    return m if vec is None else m.with_embedding(vec)


# -- pure functions -------------------------------------------------------------
def test_rank_desc_ties_depth_and_evidence() -> None:
    values = np.array([0.5, 0.9, 0.5, 0.0, 0.7])
    eligible = np.array([True, True, True, True, False])
    ranks = rank_desc(values, eligible, depth=10)
    assert ranks.tolist() == [2, 1, 2, 4, 0]  # ties share the better rank; ineligible unranked
    assert rank_desc(values, eligible, depth=10, positive_only=True).tolist() == [2, 1, 2, 0, 0]
    top1 = rank_desc(values, eligible, depth=1)
    assert top1.tolist() == [0, 1, 0, 0, 0]
    assert rank_desc(np.array([np.nan, 1.0]), np.ones(2, bool), 5).tolist() == [0, 1]


def test_fused_sum_bounds_each_lexical_signal() -> None:
    # 0: best meaning; 1: a bit less dense but one incidental BM25 hit; 2: nothing voted.
    dense = np.array([0.45, 0.30, -0.2])
    bm25 = np.array([0.0, 1.5, 0.0])
    weights = {"dense": 1.0, "bm25": 0.15}
    score, ranks, fresh, parts = fuse(
        {"dense": dense, "bm25": bm25},
        np.ones(3, bool),
        weights,
        np.full(3, T0),
        depth=2,
        bm25_saturation=3.0,
    )
    # The score is 1 + the sum of what each signal added (explain on recall shows these).
    assert score[1] == pytest.approx(1.0 + parts["dense"][1] + parts["bm25"][1], abs=1e-6)
    assert fresh is None and ranks["bm25"].tolist() == [0, 1, 0]
    assert score[0] == pytest.approx(1.0 + 0.45, abs=1e-6)
    assert score[1] == pytest.approx(1.0 + 0.30 + 0.15 * 1.5 / 4.5, abs=1e-6)
    assert score[0] > score[1]  # one incidental word never beats a clearly better meaning
    assert score[2] == 0.0  # outside the dense depth and no lexical evidence: not returned
    strong = fuse(
        {"dense": dense, "bm25": np.array([0.0, 30.0, 0.0])},
        np.ones(3, bool),
        weights,
        np.full(3, T0),
        depth=2,
    )[0]
    assert strong[1] < strong[0] + 0.15  # bounded: BM25 adds at most its weight


def test_freshness_orders_only_near_equal_relevance_and_real_age_gaps() -> None:
    times = np.array([T0, T0 + 30 * DAY, T0 + 30 * DAY + 60, T0 + 60 * DAY])
    dense = np.array([0.46, 0.37, 0.36, 0.05])  # the last is off-topic (outside the window)
    fresh = freshness(times, dense, np.ones(4, bool), window=0.15, half_life=DAY)
    assert fresh[0] == pytest.approx(0.0)  # the stalest qualified record
    assert fresh[1] == pytest.approx(1.0, abs=1e-3) and fresh[2] == pytest.approx(1.0, abs=1e-3)
    assert fresh[3] == 0.0  # newest of all, but not about the same thing: no boost
    # One conversation (minutes apart): practically no reordering.
    minutes = freshness(
        np.array([T0, T0 + 180.0]),
        np.array([0.4, 0.4]),
        np.ones(2, bool),
        window=0.15,
        half_life=DAY,
    )
    assert minutes.max() < 0.01


def test_fuse_recency_breaks_near_ties_but_never_lifts_off_topic_records() -> None:
    # 0: older, best dense + a BM25 hit; 1: 30 days newer, a bit less dense; 2: newest, off topic
    dense = np.array([0.46, 0.37, 0.05])
    bm25 = np.array([2.8, 0.0, 0.0])
    times = np.array([T0, T0 + 30 * DAY, T0 + 90 * DAY])
    weights = RetrievalConfig(weights={"recency": 0.2}, recency_window=0.15).active("hybrid")
    score, ranks, fresh, _ = fuse(
        {"dense": dense, "bm25": bm25, "entity": np.zeros(3)},
        np.ones(3, bool),
        weights,
        times,
        depth=10,
        recency_window=0.15,
    )
    assert ranks["bm25"].tolist() == [1, 0, 0]
    assert score[1] > score[0] > score[2]
    assert fresh is not None and fresh[2] == 0.0
    # Without recency the older record wins (dense and BM25 both prefer it).
    no_recency = {k: v for k, v in weights.items() if k != "recency"}
    score2, _, fresh2, _ = fuse({"dense": dense, "bm25": bm25}, np.ones(3, bool), no_recency, times)
    assert score2[0] > score2[1] and fresh2 is None


def test_top_positions_newer_wins_exact_ties() -> None:
    score = np.array([0.5, 0.5, 0.2, 0.0])
    times = np.array([T0, T0 + 1, T0 + 2, T0 + 3])
    assert top_positions(score, times, ["a", "b", "c", "d"], 10) == [1, 0, 2]
    assert top_positions(score, times, ["a", "b", "c", "d"], 1) == [1]


def test_entity_overlap_counts_each_entity_by_its_share() -> None:
    index = EntityIndex([("African Grey", "Berlin"), ("Grey Goose",), ()])
    s = index.scores("tell me about african grey parrots")
    assert s[0] == pytest.approx(1.0)  # the whole entity named
    assert s[1] == pytest.approx(0.5)  # half of it
    assert s[2] == 0.0
    assert index.scores("nothing here").tolist() == [0.0, 0.0, 0.0]


def test_config_validation() -> None:
    cfg = RetrievalConfig(weights={"bm25": 0.0})
    assert cfg.weights["dense"] == 1.0 and "bm25" not in cfg.active("hybrid")
    assert set(cfg.active("keyword")) == {"entity", "graph", "time"}
    assert set(RetrievalConfig().active("dense")) == {"dense"}
    with pytest.raises(RetrievalError, match="weights: unknown signal 'pagerank'"):
        RetrievalConfig(weights={"pagerank": 1.0})
    with pytest.raises(RetrievalError, match="weights.dense"):
        RetrievalConfig(weights={"dense": -1})
    with pytest.raises(RetrievalError, match="mode: 'fuzzy'"):
        RetrievalConfig(mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(RetrievalError, match="depth"):
        RetrievalConfig(depth=0)


def test_filters_parse_and_mask() -> None:
    f = RecallFilters.from_dict(
        {"after": "2023-11-15T00:00:00Z", "before": T0 + 10 * DAY, "kinds": "fact"}
    )
    assert f.after == pytest.approx(1_700_006_400.0) and f.kinds == ("fact",)
    for bad, match in (
        ({"session": "x"}, "filters.session: unknown filter"),
        ({"kinds": ["note"]}, "filters.kinds: 'note'"),
        ({"after": "yesterday"}, "filters.after"),
        ({"after": T0 + 1, "before": T0}, "after is later than before"),
        ({"session_id": ""}, "filters.session_id"),
    ):
        with pytest.raises(RetrievalError, match=match):
            RecallFilters.from_dict(bad)
    with pytest.raises(RetrievalError, match="filters: expected an object"):
        RecallFilters.from_dict(["kinds"])  # type: ignore[arg-type]
    # Overlap semantics: [start, end] overlaps [after, before].
    start = np.array([T0, T0 + 5 * DAY, T0 + 20 * DAY])
    end = np.array([T0 + 2 * DAY, T0 + 6 * DAY, T0 + 21 * DAY])
    sessions = np.array(["a", "b", "a"], dtype=object)
    kinds = np.array(["fact", "chunk", "fact"], dtype=object)
    window = RecallFilters(after=T0 + DAY, before=T0 + 5 * DAY)
    assert window.mask(sessions, kinds, start, end).tolist() == [True, True, False]
    assert RecallFilters(session_id="a", kinds=("fact",)).mask(
        sessions, kinds, start, end
    ).tolist() == [True, False, True]
    assert RecallFilters().empty and not window.empty


# -- the Retriever over a real store ------------------------------------------------
@pytest.fixture
def store(tmp_path) -> MemoryStore:
    s = MemoryStore(tmp_path / "store", shards=4)
    s.write_segment(
        [
            mem(
                "I adopted an African Grey parrot",
                axis(0),
                session="birds",
                t=T0,
                entities=("African Grey",),
            ),
            mem(
                "parrots need big cages",
                axis(0, 0.3, seed=1),
                session="birds",
                kind="chunk",
                t=T0 + 60,
            ),
            mem("roast chicken at 220C", axis(1), session="food", t=T0 + DAY),
            mem(
                "half marathon in October",
                axis(2),
                session="run",
                t=T0 + 2 * DAY,
                entities=("October",),
            ),
            # Another user, in the same app, talking about parrots too.
            mem(
                "my parrot is an African Grey",
                axis(0),
                user="bob",
                session="b1",
                t=T0,
                entities=("African Grey",),
            ),
            mem("parrot in another app", axis(0), app="other", user="alice", session="o1", t=T0),
        ],
        MODEL,
        DIM,
    )
    return s


def test_user_search_hybrid_dense_keyword(store) -> None:
    r = Retriever()
    snap = store.load()
    hybrid = r.search_user(snap, "app", "alice", "parrot", axis(0), top_k=3)
    assert [h.memory.session_id for h in hybrid[:2]] == ["birds", "birds"]
    top = hybrid[0]
    assert {"dense", "dense_rank", "bm25", "entity", "recency"} <= set(top.signals)
    w, sig = RetrievalConfig().weights, top.signals
    assert top.score == pytest.approx(
        1.0
        + w["dense"] * sig["dense"]
        + w["bm25"] * sig["bm25"] / (sig["bm25"] + 3.0)
        + w["entity"] * sig["entity"] / (sig["entity"] + 1.0)
        + w["recency"] * sig["recency"],
        abs=1e-4,
    )
    dense = r.search_user(snap, "app", "alice", "parrot", axis(0), top_k=10, mode="dense")
    assert len(dense) == 4 and set(dense[0].signals) == {"dense", "dense_rank"}
    keyword = r.search_user(snap, "app", "alice", "parrot", axis(0), top_k=10, mode="keyword")
    assert {h.memory.text for h in keyword} == {
        "I adopted an African Grey parrot",
        "parrots need big cages",
    }
    assert set(keyword[0].signals) <= {"bm25", "bm25_rank", "entity", "entity_rank"}
    # No query vector (e.g. no embedder): hybrid falls back to keyword signals.
    fallback = r.search_user(snap, "app", "alice", "parrot", None, top_k=10)
    assert [h.memory.memory_id for h in fallback] == [h.memory.memory_id for h in keyword]
    # Entity evidence: "African Grey" names an entity of the first record only.
    ent = r.search_user(snap, "app", "alice", "african grey", None, top_k=1, mode="keyword")
    assert ent[0].signals["entity"] == pytest.approx(1.0) and ent[0].signals["entity_rank"] == 1


def test_tenant_isolation_every_mode_and_filter(store) -> None:
    r = Retriever()
    snap = store.load()
    for mode in ("hybrid", "dense", "keyword"):
        for flt in (
            None,
            {"session_id": "b1"},
            {"kinds": ["fact"]},
            {"after": T0 - DAY, "before": T0 + DAY},
        ):
            got = r.search_user(
                snap,
                "app",
                "alice",
                "my parrot is an African Grey",
                axis(0),
                top_k=50,
                filters=flt,
                mode=mode,
            )
            assert all((h.memory.app_name, h.memory.user_id) == ("app", "alice") for h in got)
    assert (
        r.search_user(snap, "app", "alice", "parrot", axis(0), filters={"session_id": "b1"}) == []
    )
    # Only alice's shard is touched: her candidate set holds her rows and nothing else.
    cands = r.user_candidates(snap, "app", "alice")
    assert cands.size == 4 and set(cands.session_ids) == {"birds", "food", "run"}
    assert {p.seg.shard for p in cands.parts} == {shard_of("app", "alice", 4)}
    # App-wide search sees every user of the app, and only that app.
    for mode in ("hybrid", "keyword"):
        app_wide = r.search_app(snap, "app", "parrot", axis(0), top_k=10, mode=mode)
        assert {h.memory.user_id for h in app_wide} == {"alice", "bob"}
        assert {h.memory.app_name for h in app_wide} == {"app"}
    filtered = r.search_app(snap, "app", "parrot", axis(0), top_k=10, filters={"session_id": "b1"})
    assert [h.memory.user_id for h in filtered] == ["bob"]
    assert r.search_app(snap, "nope", "parrot", axis(0)) == []


def test_filters_apply_before_ranking(store) -> None:
    r = Retriever()
    snap = store.load()
    # The best match overall is the parrot; restricted to "run", top-1 is the run memory.
    got = r.search_user(
        snap, "app", "alice", "parrot", axis(0), top_k=1, filters={"session_id": "run"}
    )
    assert [h.memory.session_id for h in got] == ["run"]
    kinds = r.search_user(
        snap, "app", "alice", "parrot", axis(0), top_k=10, filters={"kinds": ["chunk"]}
    )
    assert [h.memory.kind for h in kinds] == ["chunk"]
    window = r.search_user(
        snap,
        "app",
        "alice",
        "parrot",
        axis(0),
        top_k=10,
        filters={"after": T0 + DAY / 2, "before": T0 + 1.5 * DAY},
    )
    assert [h.memory.session_id for h in window] == ["food"]


def test_forgotten_and_expired_rows_never_come_back(store) -> None:
    r = Retriever()
    store.write_segment(
        [
            mem(
                "parrot food brands",
                axis(0, 0.1, seed=2),
                session="birds2",
                t=T0 + 3 * DAY,
                expires_at=T0 + 4 * DAY,
            )
        ],
        MODEL,
        DIM,
    )
    snap = store.load()
    texts = {
        h.memory.text
        for h in r.search_user(
            snap, "app", "alice", "parrot", axis(0), top_k=10, now=T0 + 3.5 * DAY
        )
    }
    assert "parrot food brands" in texts
    later = r.search_user(snap, "app", "alice", "parrot", axis(0), top_k=10, now=T0 + 5 * DAY)
    assert "parrot food brands" not in {h.memory.text for h in later}  # TTL passed
    before = r.user_candidates(snap, "app", "alice")
    parrot = next(h for h in later if h.memory.text == "I adopted an African Grey parrot")
    store.forget(memory_ids=[parrot.memory.memory_id], owner=("app", "alice"))
    snap2 = store.load()
    after = r.user_candidates(snap2, "app", "alice")
    assert after is not before  # a forget invalidates the cached candidate set
    for mode in ("hybrid", "dense", "keyword"):
        got = r.search_user(
            snap2,
            "app",
            "alice",
            "African Grey parrot",
            axis(0),
            top_k=10,
            mode=mode,
            now=T0 + 3.5 * DAY,
        )
        assert parrot.memory.memory_id not in {h.memory.memory_id for h in got}
        # The rows around the forgotten one still map back to the right memories.
        assert all(h.memory.user_id == "alice" for h in got)
    assert "parrots need big cages" in {
        h.memory.text
        for h in r.search_user(
            snap2, "app", "alice", "parrot", axis(0), top_k=10, now=T0 + 3.5 * DAY
        )
    }
    store.forget(user=("app", "alice"))
    assert r.search_user(store.load(), "app", "alice", "parrot", axis(0)) == []


def test_candidate_cache_survives_unrelated_writes(store) -> None:
    r = Retriever()
    first = r.user_candidates(store.load(), "app", "alice")
    store.write_segment([mem("unrelated", axis(3), app="zzz", user="carol")], MODEL, DIM)
    assert r.user_candidates(store.load(), "app", "alice") is first
    store.write_segment([mem("new for alice", axis(3), session="s9", t=T0 + 9 * DAY)], MODEL, DIM)
    grown = r.user_candidates(store.load(), "app", "alice")
    assert grown is not first and grown.size == first.size + 1
    # Rows of two segments map back correctly.
    got = r.search_user(store.load(), "app", "alice", "new", axis(3), top_k=1, mode="dense")
    assert got[0].memory.text == "new for alice"


def test_keyword_only_store(tmp_path) -> None:
    s = MemoryStore(tmp_path / "kw")
    s.add([mem("I adopted a parrot", None), mem("roast chicken", None, session="s2")])
    r = Retriever()
    got = r.search_user(s.load(), "app", "alice", "parrot", axis(0), top_k=5)  # vec ignored
    assert [h.memory.text for h in got] == ["I adopted a parrot"]
    assert "dense" not in got[0].signals
    assert r.search_app(s.load(), "app", "chicken", None)[0].memory.text == "roast chicken"


def test_bad_arguments_are_named(store) -> None:
    r = Retriever()
    snap = store.load()
    with pytest.raises(RetrievalError, match="query"):
        r.search_user(snap, "app", "alice", "  ", None)
    with pytest.raises(RetrievalError, match="user_id"):
        r.search_user(snap, "app", "", "x", None)
    with pytest.raises(RetrievalError, match="top_k"):
        r.search_user(snap, "app", "alice", "x", None, top_k=0)
    with pytest.raises(RetrievalError, match="query_vec: expected dimension 16"):
        r.search_user(snap, "app", "alice", "x", np.ones(3, np.float32))
