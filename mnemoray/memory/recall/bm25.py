"""BM25 over memory key texts, as a sparse matrix so a query is one column sum.

Built per search scope (a user's slice, or an app) and cached by the caller
for the lifetime of a store snapshot: documents never change inside one. The
index keeps the tokenizer that cut its documents (and its version) and cuts
every query with it (:mod:`mnemoray.memory.recall.keywords`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from mnemoray.memory.recall.keywords import KeywordTokenizer


class BM25:
    def __init__(
        self,
        docs: Sequence[str],
        k1: float = 1.2,
        b: float = 0.75,
        tokenizer: KeywordTokenizer | None = None,
    ) -> None:
        self.tokenizer = tokenizer or KeywordTokenizer()
        self.tokenizer_version = self.tokenizer.version
        vocab: dict[str, int] = {}
        languages: set[str] = set()
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[float] = []
        lengths = np.zeros(len(docs), dtype=np.float32)
        for i, doc in enumerate(docs):
            counts: dict[int, int] = {}
            toks, language = self.tokenizer.analyze(doc)
            languages.add(language)
            lengths[i] = len(toks)
            for tok in toks:
                j = vocab.setdefault(tok, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            rows.extend([i] * len(counts))
            cols.extend(counts.keys())
            tfs.extend(counts.values())
        self.vocab = vocab
        self.languages = frozenset(languages)  # a query is stemmed in each of them
        n = len(docs)
        avg = float(lengths.mean()) if n and lengths.sum() else 1.0
        tf = np.asarray(tfs, dtype=np.float32)
        row_idx = np.asarray(rows, dtype=np.int64)
        col_idx = np.asarray(cols, dtype=np.int64)
        df = np.bincount(col_idx, minlength=len(vocab)).astype(np.float32)
        # Lucene's non-negative idf: rare terms dominate, common ones still count a little.
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * lengths[row_idx] / avg) if n else np.zeros(0, np.float32)
        weights = idf[col_idx] * tf * (k1 + 1) / (tf + norm)
        self._matrix = sparse.csc_matrix(
            (weights, (row_idx, col_idx)), shape=(n, len(vocab)), dtype=np.float32
        )
        self.size = n

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when nothing matches)."""
        terms = self.tokenizer.query_terms(query, self.languages)
        ids = sorted({self.vocab[t] for t in terms if t in self.vocab})
        if not ids or not self.size:
            return np.zeros(self.size, dtype=np.float32)
        return column_sums(self._matrix, ids)


def column_sums(matrix: sparse.csc_matrix, ids: Sequence[int]) -> np.ndarray:
    """Row sums of ``matrix``'s columns ``ids`` (ascending), as float32: what
    ``matrix[:, ids].sum(axis=1)`` gives, bit for bit (the same float32 additions in the
    same order, column by column), without building the sliced matrix: that slicing was
    most of a query's keyword scoring on a user's set (benchmarks/README.md, "Serve")."""
    out = np.zeros(matrix.shape[0], dtype=np.float32)
    ptr = matrix.indptr
    spans = [(int(ptr[j]), int(ptr[j + 1])) for j in ids]
    if spans:
        rows = np.concatenate([matrix.indices[a:b] for a, b in spans])
        vals = np.concatenate([matrix.data[a:b] for a, b in spans])
        np.add.at(out, rows, vals)  # unbuffered, in order: sequential float32 sums
    return out
