"""The recall hot path's shortcuts give the values the plain computations gave, bit for bit:
keyword scores summed over the query's columns without slicing the sparse matrix, and the
signal ranks taken once for the time axis and fusion (benchmarks/README.md, "Serve")."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import sparse

from mnemoray.memory.recall import bm25 as bm25_mod
from mnemoray.memory.recall import candidates as cand_mod
from mnemoray.memory.recall import retriever as retrieval
from mnemoray.memory.recall.bm25 import BM25, column_sums
from mnemoray.memory.recall.candidates import Candidates, EntityIndex
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.retriever import rank_candidates
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.records.record import Memory
from tests.memory.recall.test_time_signal_equal import QUESTIONS, T0, records

NAMES = ("Mel", "Max", "Oslo", "African Grey", "Berlin", "Caroline", "grey whale", "Max Mel")


def sliced_sums(matrix: sparse.csc_matrix, ids: list[int]) -> np.ndarray:
    """What the scores were before: the query's columns sliced out, then summed."""
    return np.asarray(matrix[:, ids].sum(axis=1)).ravel()


def with_entities(mems: list[Memory], seed: int) -> list[Memory]:
    rng = random.Random(seed)
    out = []
    for m in mems:
        out.append(
            Memory(
                m.app_name,
                m.user_id,
                m.session_id,
                m.kind,
                m.text,
                entities=tuple(rng.sample(NAMES, rng.randint(0, 3))),
                event_time_start=m.event_time_start,
                event_time_end=m.event_time_end,
                created_at=m.created_at,
            )
        )
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_column_sums_equal_the_sliced_matrix_sums_bit_for_bit(seed: int) -> None:
    mems = with_entities(records(1500, seed), seed)
    rng = random.Random(seed)
    for matrix in (
        BM25([m.key_text for m in mems])._matrix,
        EntityIndex([m.entities for m in mems])._matrix,
    ):
        cols = matrix.shape[1]
        # Frequent columns (many rows share them) make the additions overlap.
        frequent = np.argsort(-np.diff(matrix.indptr))[:12].tolist()
        overlapping = 0
        for _ in range(200):
            ids = sorted(
                set(
                    rng.sample(frequent, rng.randint(1, 6))
                    + rng.sample(range(cols), rng.randint(0, 4))
                )
            )
            got = column_sums(matrix, ids)
            want = sliced_sums(matrix, ids)
            assert got.dtype == want.dtype == np.float32
            assert got.tobytes() == want.tobytes()
            overlapping += int((np.diff(matrix[:, ids].tocsr().indptr) > 2).sum())
        assert overlapping > 1000  # rows summed over three columns or more
    assert column_sums(matrix, []).tobytes() == np.zeros(matrix.shape[0], np.float32).tobytes()


@pytest.mark.parametrize("seed", [3, 4])
def test_recall_results_equal_the_unshortened_path(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    mems = with_entities(records(1200, seed), seed)
    rng = np.random.default_rng(seed)
    dim = 16
    vecs = rng.standard_normal((len(mems), dim))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    config = RetrievalConfig()
    questions = [*QUESTIONS, "what did Max say about Oslo?", "African Grey", "grey whale Mel"]

    def run() -> list[list[dict]]:
        out = []
        for i, question in enumerate(questions):
            q = rng.standard_normal(dim)
            q /= np.linalg.norm(q)
            dense = vecs @ q
            for mode in ("hybrid", "keyword", "dense"):
                # A fresh set each time: nothing computed in one run carries into the other.
                cands = Candidates.from_memories(mems, dense)
                results = rank_candidates(
                    cands, question, q, 8, RecallFilters(), config, mode, now=T0 + 86_400.0 * i
                )
                out.append([r.to_dict(True) for r in results])
        return out

    state = rng.bit_generator.state
    new = run()
    rng.bit_generator.state = state
    monkeypatch.setattr(bm25_mod, "column_sums", sliced_sums)
    monkeypatch.setattr(cand_mod, "column_sums", sliced_sums)
    plain_fuse = retrieval.fuse
    monkeypatch.setattr(retrieval, "fuse", lambda *a, known_ranks=None, **k: plain_fuse(*a, **k))
    old = run()
    assert new == old
    assert sum(len(r) for r in new) > 200
    assert any("time" in m["signals"] for r in new for m in r)  # the time axis took part
    assert any("entity_rank" in m["signals"] for r in new for m in r)
