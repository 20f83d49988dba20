"""``explain`` on recall: the reported contributions add up to the reported score exactly
(to float precision), not just within the rounding of each term."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mnemoray.memory.recall.fusion import OFFSET, reported_contributions
from mnemoray.memory.recall.retriever import Retriever
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.parquet.store import MemoryStore
from tests.support.factories import DAY, T0

DIM, MODEL = 16, "test-model"
EXACT = 1e-9  # float precision of a sum of a few 6-decimal figures, far below 1e-6


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def gap(reported: dict) -> float:
    return abs(reported["score"] - (1.0 + sum(reported["contributions"].values())))


def test_terms_rounded_alone_drift_and_the_remainder_goes_to_offset() -> None:
    parts = {"dense": 0.1234564, "bm25": 0.1234564, "entity": 0.1234564}
    score = 1.0 + sum(parts.values()) + 1e-9  # as fuse() builds it
    naive = {name: round(v, 6) for name, v in parts.items()}
    assert abs(round(score, 6) - 1.0 - sum(naive.values())) > 5e-7  # the reviewer's drift
    got = reported_contributions(parts, score)
    assert {k: got[k] for k in parts} == naive and got[OFFSET] == pytest.approx(1e-6)
    assert abs(round(score, 6) - (1.0 + sum(got.values()))) <= EXACT
    # No remainder: no offset listed; a fusion offset stays listed, remainder included.
    assert OFFSET not in reported_contributions({"dense": 0.25}, 1.25 + 1e-9)
    stale = {"graph": -1.5, "dense": 0.3, OFFSET: 0.2}  # the shift grew by 0.2
    shifted = reported_contributions(stale, 1.0 + sum(stale.values()) + 1e-9)
    assert shifted == pytest.approx(stale, abs=EXACT)


def test_every_explained_result_adds_up_in_its_json(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "store", shards=2)
    texts = [
        "my parrot Kiwi eats sunflower seeds",
        "Kiwi the African Grey hates the vacuum",
        "parrots need a big cage and fresh fruit",
        "roast chicken at 220C on Sunday",
        "the vet said Kiwi should eat apples",
        "half marathon in October with Ben",
    ]
    store.write_segment(
        [
            Memory(
                "app",
                "ana",
                f"s{i % 3}",
                "fact",
                text,
                event_time_start=T0 + i * DAY,
                event_time_end=T0 + i * DAY,
                created_at=T0 + i * DAY,
                entities=("Kiwi",) if "Kiwi" in text else (),
            ).with_embedding(vec(i))
            for i, text in enumerate(texts)
        ],
        MODEL,
        DIM,
    )
    snap, retriever = store.load(), Retriever()
    checked = 0
    for query, qvec in (
        ("what does Kiwi eat", vec(0)),
        ("parrot cage fruit", vec(2)),
        ("Sunday chicken", vec(3)),
        ("Kiwi", None),
    ):
        for mode in ("hybrid", "dense", "keyword"):
            if mode == "dense" and qvec is None:
                continue
            for hit in retriever.search_user(snap, "app", "ana", query, qvec, top_k=6, mode=mode):
                reported = json.loads(json.dumps(hit.to_dict(explain=True)))
                assert gap(reported) <= EXACT, reported
                checked += 1
    assert checked >= 12
