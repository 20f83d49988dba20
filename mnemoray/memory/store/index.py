"""The one vector index format, shared by the batch pipeline and online serving.

Vectors are L2-normalised float32 and similarity is inner product (= cosine).
Every search returns ``(scores, ids)`` of shape ``(n_queries, k)``; empty slots
hold id -1 and score -inf (FAISS's convention, with a cleaner pad value).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal, get_args

import faiss
import numpy as np

from mnemoray.errors import InvalidInput, StoreCorrupt
from mnemoray.files import atomic_write

IndexKind = Literal["flat", "hnsw", "ivf", "auto"]
INDEX_KINDS: tuple[str, ...] = get_args(IndexKind)

# "auto" stays exact (flat) below this many vectors: a flat scan is cheap at segment
# size but grows linearly, while HNSW stays flat and its build is paid once per
# segment (figures: benchmarks/README.md, "Design measurements").
AUTO_FLAT_MAX = 50_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
# Near-exact recall@10 on random vectors (the hard case) at a small per-query cost;
# real sentence embeddings have more structure and recall better at the same ef.
HNSW_EF_SEARCH = 128
# A filtered ANN query whose allowed set is this small is answered exactly by
# gathering those rows: exact beats a graph walk that must skip most of the nodes
# it visits.
EXACT_SUBSET_MAX = 8192
NORM_TOLERANCE = 1e-3


class VectorIndexError(InvalidInput):
    """Bad vectors or query; ``field`` names what is wrong. (A missing or unreadable
    index file is :class:`mnemoray.errors.StoreCorrupt`.)"""


def check_vectors(vectors: Any, name: str = "vectors") -> np.ndarray:
    """A C-contiguous (n, d) float32 array of finite, L2-normalised rows."""
    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise VectorIndexError(f"expected a 2-d (n, dim) array, got shape {arr.shape}", field=name)
    if arr.shape[1] < 1:
        raise VectorIndexError("dimension must be >= 1", field=name)
    if not np.isfinite(arr).all():
        raise VectorIndexError("contains NaN or infinite values", field=name)
    if len(arr):
        norms = np.linalg.norm(arr, axis=1)
        bad = np.flatnonzero(np.abs(norms - 1.0) > NORM_TOLERANCE)
        if len(bad):
            raise VectorIndexError(
                f"row {bad[0]} has L2 norm {norms[bad[0]]:.4f}; rows must be normalised", field=name
            )
    return arr


def _check_query(query: Any, dim: int) -> np.ndarray:
    q = np.ascontiguousarray(query, dtype=np.float32)
    if q.ndim == 1:
        q = q[None, :]
    if q.ndim != 2 or q.shape[1] != dim:
        raise VectorIndexError(
            f"expected shape ({dim},) or (n, {dim}), got {q.shape}", field="query"
        )
    if not np.isfinite(q).all():
        raise VectorIndexError("contains NaN or infinite values", field="query")
    return q


def _check_k(k: int) -> None:
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise VectorIndexError(f"must be a positive integer, got {k!r}", field="k")


def build_index(vectors: np.ndarray, kind: IndexKind = "auto") -> faiss.Index:
    """An inner-product FAISS index over ``vectors`` (row i gets id i)."""
    if kind not in INDEX_KINDS:
        raise VectorIndexError(f"{kind!r} is not one of {', '.join(INDEX_KINDS)}", field="kind")
    x = check_vectors(vectors)
    n, dim = x.shape
    if kind == "auto":
        kind = "flat" if n < AUTO_FLAT_MAX else "hnsw"
    if kind == "flat":
        index: faiss.Index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH  # persisted in the file
    else:
        if n == 0:
            raise VectorIndexError("an ivf index needs training vectors, got 0 rows", field="kind")
        # ~4*sqrt(n) lists, but at least 39 training points per list (FAISS's minimum).
        nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(x)
        index.nprobe = max(1, math.ceil(nlist / 8))  # persisted in the file
    if n:
        index.add(x)
    return index


def write_index(index: faiss.Index, path: str | Path) -> None:
    """Write ``index`` to ``path`` atomically (temp file, fsync, rename)."""
    atomic_write(Path(path), lambda tmp: faiss.write_index(index, str(tmp)))


def read_index(path: str | Path, mmap: bool = True) -> faiss.Index:
    """Read an index, memory-mapped and read-only where the type allows.

    ``IO_FLAG_MMAP_IFC`` maps flat codes (flat, HNSW storage, IVF lists) so
    replicas on one host share the page cache; ``IO_FLAG_MMAP`` maps IVF
    inverted lists for builds that refuse the former.
    """
    p = Path(path)
    if not p.is_file():
        raise StoreCorrupt(f"index file does not exist: {p}")
    if mmap:
        for flags in (
            faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY,
            faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY,
        ):
            try:
                return faiss.read_index(str(p), flags)
            except RuntimeError:
                continue
    try:
        return faiss.read_index(str(p))
    except RuntimeError as exc:
        raise StoreCorrupt(f"cannot read FAISS index {p}: {exc}") from exc


class _Pinned:
    """Numpy's view of FAISS-owned memory; being the array's base keeps the index alive."""

    def __init__(self, index: faiss.Index, flat: faiss.IndexFlat) -> None:
        self.index = index
        n, dim = flat.ntotal, flat.d
        view = faiss.rev_swig_ptr(flat.get_xb(), n * dim)
        self.__array_interface__ = {
            "shape": (n, dim),
            "typestr": "<f4",
            "data": (view.ctypes.data, True),
            "version": 3,
        }


def flat_vectors(index: faiss.Index) -> np.ndarray | None:
    """Zero-copy, read-only (n, d) view of a flat or HNSW-flat index's vectors.

    None for index types that do not store raw vectors contiguously (IVF).
    """
    flat = index if isinstance(index, faiss.IndexFlat) else None
    if flat is None and isinstance(index, faiss.IndexHNSW):
        storage = faiss.downcast_index(index.storage)
        flat = storage if isinstance(storage, faiss.IndexFlat) else None
    if flat is None or flat.metric_type != faiss.METRIC_INNER_PRODUCT:
        return None
    if flat.ntotal == 0:
        return np.zeros((0, flat.d), dtype=np.float32)
    return np.asarray(_Pinned(index, flat))


def _top_k(scores: np.ndarray, k: int, ids: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Best ``k`` columns per row of ``scores`` (nq, m); -inf entries never win."""
    nq, m = scores.shape
    out_s = np.full((nq, k), -np.inf, dtype=np.float32)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    for row in range(nq):
        s = scores[row]
        valid = np.count_nonzero(s > -np.inf)
        kk = min(k, int(valid))
        if kk == 0:
            continue
        top = np.argpartition(-s, kk - 1)[:kk] if kk < m else np.arange(m)
        top = top[np.argsort(-s[top], kind="stable")][:kk]
        out_s[row, :kk] = s[top]
        out_i[row, :kk] = top if ids is None else ids[top]
    return out_s, out_i


def _as_allowed_ids(allowed: np.ndarray, ntotal: int) -> np.ndarray:
    arr = np.asarray(allowed)
    if arr.dtype == bool:
        if arr.shape != (ntotal,):
            raise VectorIndexError(
                f"a mask needs shape ({ntotal},), got {arr.shape}", field="allowed"
            )
        return np.flatnonzero(arr)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise VectorIndexError("expected a boolean mask or a 1-d array of row ids", field="allowed")
    if len(arr) and (arr.min() < 0 or arr.max() >= ntotal):
        raise VectorIndexError(f"row ids must lie in [0, {ntotal})", field="allowed")
    return np.unique(arr)


def _selector_search(
    index: faiss.Index, q: np.ndarray, k: int, ids: np.ndarray, exhaustive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    mask = np.zeros(index.ntotal, dtype=bool)
    mask[ids] = True
    bitmap = np.packbits(mask, bitorder="little")  # must outlive the search
    sel = faiss.IDSelectorBitmap(index.ntotal, faiss.swig_ptr(bitmap))
    # faiss's stub (__init__.pyi) lacks SearchParametersHNSW, fvec_inner_products_ny and
    # the SearchParameters keyword arguments: those lines are `type: ignore`d.
    if isinstance(index, faiss.IndexHNSW):
        params: Any = faiss.SearchParametersHNSW(  # type: ignore[attr-defined]
            sel=sel, efSearch=max(index.hnsw.efSearch, k)
        )
    elif isinstance(index, faiss.IndexIVF):
        params = faiss.SearchParametersIVF(  # type: ignore[call-arg]
            sel=sel, nprobe=index.nlist if exhaustive else index.nprobe
        )
    else:
        params = faiss.SearchParameters(sel=sel)  # type: ignore[call-arg]
    scores, found = index.search(q, k, params=params)
    return _faiss_result(scores, found)


def _faiss_result(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = scores.astype(np.float32, copy=False)
    scores[ids < 0] = -np.inf
    return scores, ids.astype(np.int64, copy=False)


def _slice_scores(vectors: np.ndarray, q: np.ndarray, start: int, end: int) -> np.ndarray:
    """Inner products (nq, end - start) of the queries with rows [start, end)."""
    if not vectors.flags.c_contiguous:
        return q @ vectors[start:end].T
    # FAISS's SIMD kernel for any contiguous rows: a memory-mapped index stores its
    # floats at an odd file offset, which numpy would copy before BLAS; and one kernel
    # gives the same bits whether the rows are mapped from a file or held by the
    # process that wrote them (BLAS sums in another order).
    out = np.empty((len(q), end - start), dtype=np.float32)
    if end > start:
        base = vectors.ctypes.data + start * vectors.strides[0]
        for row in range(len(q)):
            faiss.fvec_inner_products_ny(  # type: ignore[attr-defined]
                faiss.swig_ptr(out[row]),
                faiss.swig_ptr(q[row]),
                faiss.cast_integer_to_float_ptr(base),
                vectors.shape[1],
                end - start,
            )
    return out


def search_range(
    index_or_vectors: faiss.Index | np.ndarray,
    query: np.ndarray,
    start: int,
    end: int,
    k: int,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k over rows [start, end) (one tenant's contiguous slice).

    ``mask`` (bool, length end - start) drops rows (tombstoned, expired,
    filtered). Scoring the slice directly wins whenever raw vectors are
    reachable: ``IndexFlatIP`` + ``IDSelectorRange`` would test every id of the
    index against the selector. IVF falls back to an exhaustive selector search.
    """
    _check_k(k)
    if isinstance(index_or_vectors, faiss.Index):
        vectors = flat_vectors(index_or_vectors)
        n, dim = index_or_vectors.ntotal, index_or_vectors.d
    else:
        vectors = np.asarray(index_or_vectors)
        if vectors.ndim != 2 or vectors.dtype != np.float32:
            raise VectorIndexError("expected a 2-d float32 array", field="vectors")
        n, dim = vectors.shape
    if not 0 <= start <= end <= n:
        raise VectorIndexError(f"[{start}, {end}) is not within [0, {n})", field="range")
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (end - start,):
            raise VectorIndexError(
                f"expected shape ({end - start},), got {mask.shape}", field="mask"
            )
    q = _check_query(query, dim)
    if vectors is None:
        ids = np.arange(start, end) if mask is None else start + np.flatnonzero(mask)
        if not len(ids):
            return _top_k(np.empty((len(q), 0), dtype=np.float32), k, None)
        assert isinstance(index_or_vectors, faiss.Index)  # no raw vectors: an index
        return _selector_search(index_or_vectors, q, k, ids, exhaustive=True)
    scores = _slice_scores(vectors, q, start, end)
    if mask is not None:
        scores[:, ~mask] = -np.inf
    s, i = _top_k(scores, k, None)
    i[i >= 0] += start
    return s, i


def search_ann(
    index: faiss.Index, query: np.ndarray, k: int, allowed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k by the index's own search (approximate for HNSW / IVF).

    ``allowed`` restricts results to some rows: a boolean mask over all rows
    or an array of row ids. Small allowed sets are searched exactly.
    """
    _check_k(k)
    q = _check_query(query, index.d)
    if allowed is None:
        return _faiss_result(*index.search(q, k))
    ids = _as_allowed_ids(allowed, index.ntotal)
    if not len(ids):
        return _top_k(np.empty((len(q), 0), dtype=np.float32), k, None)
    if len(ids) > EXACT_SUBSET_MAX:
        return _selector_search(index, q, k, ids)
    vectors = flat_vectors(index)
    if vectors is None:
        # IVF: few allowed rows may sit in lists nprobe never visits; probe all.
        return _selector_search(index, q, k, ids, exhaustive=True)
    return _top_k(q @ vectors[ids].T, k, ids)
