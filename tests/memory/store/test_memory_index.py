"""The shared FAISS index format: build, atomic write, mmap read, exact and ANN search."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.store.index import (
    EXACT_SUBSET_MAX,
    VectorIndexError,
    build_index,
    flat_vectors,
    read_index,
    search_ann,
    search_range,
    write_index,
)


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute(x: np.ndarray, q: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    scores = x[rows] @ q
    return rows[np.argsort(-scores, kind="stable")[:k]]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    return unit(rng, 20_000, 32), unit(rng, 50, 32)


@pytest.fixture(scope="module")
def hnsw(data):
    return build_index(data[0], "hnsw")


def test_kinds_and_auto(data):
    x = data[0][:2000]
    assert isinstance(build_index(x, "auto"), faiss.IndexFlatIP)
    assert isinstance(build_index(x, "flat"), faiss.IndexFlatIP)
    ivf = build_index(x, "ivf")
    assert isinstance(ivf, faiss.IndexIVFFlat) and ivf.ntotal == 2000 and ivf.nprobe >= 1
    assert build_index(x[:0], "flat").ntotal == 0


def test_write_read_mmap_roundtrip(tmp_path, data, hnsw):
    x = data[0]
    for kind, index in (
        ("flat", build_index(x[:5000], "flat")),
        ("hnsw", hnsw),
        ("ivf", build_index(x[:5000], "ivf")),
    ):
        path = tmp_path / f"{kind}.faiss"
        write_index(index, path)
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
        loaded = read_index(path)
        assert type(loaded) is type(index) and loaded.ntotal == index.ntotal
        q = data[1][:3]
        assert np.array_equal(loaded.search(q, 5)[1], index.search(q, 5)[1])
        vectors = flat_vectors(loaded)
        if kind == "ivf":
            assert vectors is None
        else:
            # Zero-copy view of the mapped file: identical bits, not writable.
            assert np.array_equal(vectors, x[: loaded.ntotal])
            assert not vectors.flags.writeable
            _, ids = search_range(loaded, q[0], 100, 900, 5)  # scores the mapped rows in place
            assert list(ids[0]) == list(brute(x, q[0], np.arange(100, 900), 5))
    assert read_index(tmp_path / "hnsw.faiss").hnsw.efSearch == hnsw.hnsw.efSearch


def test_view_keeps_index_alive(data):
    vectors = flat_vectors(build_index(data[0][:100], "flat"))  # index dropped at once
    assert np.array_equal(vectors, data[0][:100])


def test_search_range_is_exact(data, hnsw):
    x, queries = data
    start, end, k = 3000, 4500, 10
    mask = np.random.default_rng(1).random(end - start) < 0.5
    ivf = build_index(x, "ivf")
    for source in (x, build_index(x, "flat"), hnsw, ivf):
        scores, ids = search_range(source, queries[:4], start, end, k)
        assert ids.shape == (4, k)
        for qi in range(4):
            assert list(ids[qi]) == list(brute(x, queries[qi], np.arange(start, end), k))
            np.testing.assert_allclose(scores[qi], x[ids[qi]] @ queries[qi], rtol=1e-5)
        _, masked = search_range(source, queries[0], start, end, k, mask=mask)
        assert list(masked[0]) == list(brute(x, queries[0], start + np.flatnonzero(mask), k))


def test_search_range_pads_short_ranges(data):
    x, queries = data
    scores, ids = search_range(x, queries[0], 10, 13, 5)
    assert list(ids[0][3:]) == [-1, -1] and np.isneginf(scores[0][3:]).all()
    assert sorted(ids[0][:3]) == [10, 11, 12]
    _, ids = search_range(x, queries[0], 10, 13, 5, mask=np.zeros(3, dtype=bool))
    assert (ids == -1).all()


def test_hnsw_recall_at_10(data, hnsw):
    x, queries = data
    _, truth = search_range(x, queries, 0, len(x), 10)
    _, found = search_ann(hnsw, queries, 10)
    recall = np.mean([len(set(found[i]) & set(truth[i])) / 10 for i in range(len(queries))])
    assert recall >= 0.95


def test_search_ann_allowed(data, hnsw):
    x, queries = data
    small = np.arange(100, 100 + 500)  # exact path
    _, ids = search_ann(hnsw, queries[0], 10, small)
    assert list(ids[0]) == list(brute(x, queries[0], small, 10))
    big = np.zeros(len(x), dtype=bool)
    big[::2] = True  # 10k rows > EXACT_SUBSET_MAX: filtered graph search
    assert big.sum() > EXACT_SUBSET_MAX
    _, ids = search_ann(hnsw, queries[:10], 10, big)
    assert (ids % 2 == 0).all()
    _, truth = search_range(x, queries[:10], 0, len(x), 10, mask=big)
    assert np.mean([len(set(ids[i]) & set(truth[i])) / 10 for i in range(10)]) >= 0.9
    ivf = build_index(x, "ivf")
    _, ids = search_ann(ivf, queries[0], 3, np.array([5, 6]))  # few rows, any lists
    assert sorted(ids[0][:2]) == [5, 6] and ids[0][2] == -1
    _, ids = search_ann(hnsw, queries[0], 3, np.zeros(len(x), dtype=bool))
    assert (ids == -1).all()


def test_bad_input_is_named(tmp_path, data):
    x = data[0][:100]
    with pytest.raises(VectorIndexError, match="norm"):
        build_index(x * 2)
    with pytest.raises(VectorIndexError, match="NaN"):
        build_index(np.full((2, 4), np.nan, dtype=np.float32))
    with pytest.raises(VectorIndexError, match="kind"):
        build_index(x, "annoy")
    with pytest.raises(VectorIndexError, match="ivf"):
        build_index(x[:0], "ivf")
    with pytest.raises(VectorIndexError, match="query"):
        search_range(x, np.ones(5, dtype=np.float32), 0, 10, 3)
    with pytest.raises(VectorIndexError, match="range"):
        search_range(x, x[0], 50, 200, 3)
    with pytest.raises(VectorIndexError, match="k"):
        search_range(x, x[0], 0, 10, 0)
    with pytest.raises(VectorIndexError, match="mask"):
        search_range(x, x[0], 0, 10, 3, mask=np.ones(3, dtype=bool))
    with pytest.raises(VectorIndexError, match="allowed"):
        search_ann(build_index(x), x[0], 3, np.array([500]))
    with pytest.raises(StoreCorrupt, match="does not exist"):  # a store's file: not input
        read_index(tmp_path / "missing.faiss")
    (tmp_path / "junk.faiss").write_bytes(b"not an index")
    with pytest.raises(StoreCorrupt, match="junk.faiss"):
        read_index(tmp_path / "junk.faiss")
