"""Batch recall (mnemoray.memory.service.batch_recall): one encoder call per batch, the answers
of one-at-a-time recall, in input order, bad lines answered without stopping the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mnemoray.errors import ConfigError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.batch_recall import BatchRecall
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from tests.memory.store.test_compact import HashEmbedder

FACTS = [
    "keeps a grey parrot called Kiwi",
    "runs marathons in October",
    "bakes sourdough bread every Sunday",
    "plays the cello in an orchestra",
    "drives an old blue Volvo",
]


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        self.calls: list[int] = []

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        self.calls.append(len(texts))
        return super()._encode(texts, batch_size)


@pytest.fixture
def service(tmp_path: Path) -> MemoryService:
    svc = MemoryService(
        MemoryStore(tmp_path / "store", 2), CountingEmbedder(), ExtractiveSummarizer()
    )
    svc.add_memories(
        [
            Memory(
                "app", f"u{u}", f"s{u}", "fact", f"User {u} {fact}", created_at=1_700_000_000.0 + i
            )
            for u in range(4)
            for i, fact in enumerate(FACTS)
        ]
    )
    svc.embedder.calls.clear()
    return svc


def _lines(n: int, distinct: bool = False) -> list[bytes]:
    queries = ["parrot", "marathon", "bread on Sunday", "cello", "blue car"]
    return [
        json.dumps(
            {
                "qid": i,
                "app_name": "app",
                "user_id": f"u{i % 4}",
                "query": queries[i % len(queries)] + (f" {i}" if distinct else ""),
                "top_k": 3,
            }
        ).encode()
        for i in range(n)
    ]


@pytest.mark.parametrize("workers", [1, 3])
def test_batches_answer_as_one_at_a_time_recall(service: MemoryService, workers: int) -> None:
    lines = _lines(11, distinct=True)
    got = list(BatchRecall(service, batch_size=4, workers=workers).answers(lines))
    assert service.embedder.calls == [4, 4, 3]  # one encoder call per batch
    assert [a["qid"] for a in got] == list(range(11))
    for raw, answer in zip(lines, got, strict=True):
        q = json.loads(raw)
        alone = service.search("app", q["user_id"], q["query"], 3)
        assert [(m["memory_id"], m["score"]) for m in answer["memories"]] == [
            (r.memory.memory_id, round(r.score, 6)) for r in alone
        ]
        assert answer["took_ms"] >= 0


def test_repeated_queries_come_from_the_query_cache(service: MemoryService) -> None:
    got = list(BatchRecall(service, batch_size=4).answers(_lines(11)))
    # 5 distinct texts: batch 1 encodes 4, batch 2 only the fifth, batch 3 nothing.
    assert service.embedder.calls == [4, 1] and len(got) == 11
    assert all(a["memories"] for a in got)


def test_bad_lines_are_answered_in_place(service: MemoryService) -> None:
    lines = [
        _lines(1)[0],
        b"{bad",
        b"   ",
        b'{"qid": "x", "app_name": "app"}',
        b'{"qid": "k", "app_name": "app", "user_id": "u1", "query": "parrot", '
        b'"filters": {"kinds": ["nope"]}}',
        b'{"qid": "n", "app_name": "app", "user_id": "nobody", "query": "parrot"}',
    ]
    batch = BatchRecall(service, batch_size=2)
    got = list(batch.answers(lines))
    assert [a.get("qid") for a in got] == [0, None, "x", "k", "n"]
    assert got[1]["line"] == 2 and got[1]["error"].startswith("invalid JSON")
    assert got[2]["line"] == 4 and "user_id" in got[2]["error"]
    assert "filters.kinds" in got[3]["error"]
    assert got[4]["memories"] == []  # a user without memories: searched, nothing embedded
    assert batch.failed == 3
    assert sum(service.embedder.calls) == 1


def test_keyword_mode_never_embeds(service: MemoryService) -> None:
    got = list(BatchRecall(service, mode="keyword").answers(_lines(5)))
    assert service.embedder.calls == [] and all(a["memories"] for a in got)


def test_settings_are_checked(service: MemoryService) -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        BatchRecall(service, batch_size=0)
    with pytest.raises(ConfigError, match="workers"):
        BatchRecall(service, workers=0)
