"""App-wide recall over a store split across replicas (index_mode: deployment): every
shard's replica proposes, one ranking decides; it must equal a whole-store replica's."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service import app_recall
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.protocol import open_backend
from mnemoray.summarizers import ExtractiveSummarizer
from tests.memory.store.test_compact import HashEmbedder

SHARDS = 4
FACTS = [
    "keeps a grey parrot called Kiwi",
    "runs marathons in October",
    "bakes sourdough bread every Sunday",
    "plays the cello in an orchestra",
    "drives an old blue Volvo",
    "is allergic to peanuts",
]


def _service(
    root: Path, load_shards: list[int] | None = None, config: RetrievalConfig | None = None
) -> MemoryService:
    return MemoryService(
        MemoryStore(root, SHARDS, load_shards=load_shards),
        HashEmbedder(),
        ExtractiveSummarizer(),
        config,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    whole = _service(root)
    memories = [
        Memory(
            "app",
            f"user{u}",
            f"s{u}",
            "fact",
            f"User {u} {fact}",
            created_at=1_700_000_000.0 + u * 60 + i,
        )
        for u in range(12)
        for i, fact in enumerate(FACTS[u % 3 : u % 3 + 3])
    ]
    memories.append(Memory("other", "user0", "s", "fact", "User 0 keeps a parrot too"))
    memories.append(
        Memory(
            "app", "user1", "s1", "fact", "User 1 parrot secret for one agent", agent_name="helper"
        )
    )
    whole.add_memories(memories)
    whole.close()
    return root


def _sharded(
    root: Path,
    query: str,
    top_k: int,
    mode: str | None,
    filters: dict | None = None,
    config: RetrievalConfig | None = None,
) -> list[tuple[str, str, float]]:
    whole = _service(root, config=config)
    vec = None if mode == "keyword" else whole.embedder.encode([query])[0]
    proposals = []
    for shard in range(SHARDS):
        part = _service(root, load_shards=[shard], config=config)
        proposals.append(
            MemoryOps(part).call(
                "app_candidates",
                "app",
                "",
                {
                    "query": query,
                    "query_vec": vec,
                    "top_k": top_k,
                    "filters": filters,
                    "mode": mode,
                },
            )
        )
        part.close()
    assert all(isinstance(p, app_recall.AppProposal) for p in proposals)
    request = whole.resolve("app", None, query, top_k, filters, mode)
    results = app_recall.rank(whole.retriever_for("app").config, proposals, request, vec)
    whole.close()
    return [(r.memory.user_id, r.memory.memory_id, round(r.score, 6)) for r in results]


def _whole(
    root: Path,
    query: str,
    top_k: int,
    mode: str | None,
    filters: dict | None = None,
    config: RetrievalConfig | None = None,
) -> list[tuple[str, str, float]]:
    whole = _service(root, config=config)
    out = MemoryOps(whole).call(
        "recall_app", "app", "", {"query": query, "top_k": top_k, "filters": filters, "mode": mode}
    )
    whole.close()
    return [(m["user_id"], m["memory_id"], round(m["score"], 6)) for m in out["memories"]]


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_every_shard_proposing_ranks_as_the_whole_store(store: Path, mode: str) -> None:
    for query in ("grey parrot", "marathon in October", "cello orchestra"):
        sharded = _sharded(store, query, 5, mode)
        assert sharded == _whole(store, query, 5, mode)
        assert len({user for user, _, _ in sharded}) > 1  # across users, from many shards


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_more_rows_than_the_candidate_depth_still_rank_as_the_whole_store(
    store: Path, mode: str
) -> None:
    # 4 candidates of 37 rows: every shard proposes 4, the union is cut to the 4 nearest.
    config = RetrievalConfig(app_candidates=4)
    for query in ("grey parrot Kiwi", "sourdough bread", "old blue Volvo"):
        assert _sharded(store, query, 3, mode, config=config) == _whole(
            store, query, 3, mode, config=config
        )


@pytest.mark.parametrize("scheme", ["parquet", "lancedb"])
def test_agent_only_rows_never_take_the_places_of_visible_ones(tmp_path: Path, scheme: str) -> None:
    svc = MemoryService(
        open_backend(f"{scheme}://{tmp_path / 'store'}"),
        HashEmbedder(),
        ExtractiveSummarizer(),
        RetrievalConfig(app_candidates=3),
    )
    svc.add_memories(
        [
            Memory("app", f"u{i}", "s", "fact", f"Parrot feathers note {i}", agent_name="triage")
            for i in range(4)
        ]
        + [Memory("app", "u9", "s", "fact", "Parrot feathers are shared")]
    )
    found = svc.search_app("app", "parrot feathers note", 3)
    assert [r.memory.text for r in found] == ["Parrot feathers are shared"]
    mine = svc.search_app("app", "parrot feathers note", 3, {"agent_name": "triage"})
    assert len(mine) == 3
    svc.close()


def test_keyword_mode_finds_the_same_best_records(store: Path) -> None:
    sharded = _sharded(store, "sourdough bread", 4, "keyword")
    whole = _whole(store, "sourdough bread", 4, "keyword")
    assert {m for _, m, _ in sharded} == {m for _, m, _ in whole}
    assert len(sharded) == 4


def test_filters_and_scopes_hold_across_shards(store: Path) -> None:
    assert all(
        user == "user3"
        for user, _, _ in _sharded(store, "parrot", 5, "hybrid", {"session_id": "s3"})
    )
    # Another app's records and one agent's own records never reach an app-wide answer.
    texts = {m for _, m, _ in _sharded(store, "parrot secret", 20, "hybrid")}
    whole = _service(store)
    snap = whole.snapshot()
    hidden = {m.memory_id for m in snap.iter_memories("app", "user1") if m.agent_name}
    other = {m.memory_id for m in snap.iter_memories("other", "user0")}
    whole.close()
    assert hidden and other and not texts & (hidden | other)


def test_a_replica_with_some_shards_refuses_recall_app_alone(store: Path) -> None:
    from mnemoray.errors import Unavailable

    with pytest.raises(Unavailable, match="needs every shard"):
        MemoryOps(_service(store, load_shards=[0])).call(
            "recall_app", "app", "", {"query": "parrot"}
        )
