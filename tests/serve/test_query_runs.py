"""The replica encodes a query micro-batch in runs of similar lengths
(``ingress.query_run_rows``): ONNX Runtime only, evened out, and the vectors are the
one-run vectors up to float rounding, so recall ranks the same."""

from __future__ import annotations

import numpy as np
import pytest

from mnemoray.embedders import open_embedder
from mnemoray.embedders.onnx import OnnxEmbedder
from mnemoray.embedders.query_encoder import query_run_rows
from mnemoray.settings.serve import parse_settings

QUERIES = [
    "what did my sister say about the trip to Oslo in March",
    "Max",
    "where is the dentist",
    "when is my flight",
    "who is Caroline's brother",
    "what did I cook for the party with my friends from work last Saturday night",
    "budget",
    "pet food brand",
    "how much did I spend on running shoes this year",
    "which day is the concert",
    "my plans in Berlin",
    "what was I worried about",
    "the book Mel recommended",
    "did I cancel the gym",
    "what happened on Monday?",
    "my partner's favourite restaurant in Lisbon and the dish we ordered there",
]


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    loaded = open_embedder("onnx")
    assert isinstance(loaded, OnnxEmbedder)
    return loaded


def test_runs_are_at_most_the_setting_and_evened_out(onnx: OnnxEmbedder) -> None:
    most = parse_settings({"store": "unused"}).models.query_run_rows
    assert most == 6
    got = {n: query_run_rows(onnx, n, most) for n in range(1, 17)}
    assert all(got[n] == n for n in range(1, 7))  # one run, as before
    assert got[7] == 4 and got[10] == 5 and got[12] == 6 and got[13] == 5 and got[16] == 6
    for n, rows in got.items():
        runs = -(-n // rows)
        assert rows <= most and runs == -(-n // most)  # no more runs than needed
        assert n - (runs - 1) * rows >= rows - runs  # the last run is not a straggler


def test_other_embedders_take_the_batch_whole() -> None:
    from mnemoray.embedders.base import Embedder

    class Remote(Embedder):  # one call per run: splitting would multiply them
        model_id, dim = "remote", 3

        def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
            return np.ones((len(texts), 3), dtype=np.float32)

    assert query_run_rows(Remote(), 16, 6) == 16


def test_run_vectors_are_the_one_run_vectors_up_to_rounding(onnx: OnnxEmbedder) -> None:
    whole = onnx.encode(QUERIES, len(QUERIES))
    runs = onnx.encode(QUERIES, query_run_rows(onnx, len(QUERIES), 6))
    alone = np.stack([onnx.encode([q], 1)[0] for q in QUERIES])
    assert np.abs(runs - whole).max() < 1e-6
    assert np.abs(runs - alone).max() < 1e-6
    # The nearest query to each query (the ranking a recall makes) is unchanged.
    np.testing.assert_array_equal(
        np.argsort(-(runs @ runs.T), axis=1), np.argsort(-(whole @ whole.T), axis=1)
    )
