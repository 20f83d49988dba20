"""App-wide recall over a store split across replicas (``index_mode: deployment``).

An Index replica holds some shards, so no replica can rank an app's users alone. Each
proposes from its shards what a whole-store recall would consider: the ANN nearest
``depth`` records with their cosine (hybrid, dense), or its keyword best ``depth``
(keyword mode, or a store without vectors). The ingress ranks the union with the one
fusion function (``retrieval.rank_proposed``) after cutting the union to its nearest
``depth``: the union of every shard's nearest ``depth`` holds the whole store's nearest
``depth``, so the cut gives exactly the candidates a whole-store replica ranks, and
hybrid and dense answers are its answers. Keyword answers rank BM25 over the union,
whose term statistics are the union's rather than the whole app's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.request import RecallRequest
from mnemoray.memory.recall.result import RecallResult
from mnemoray.memory.recall.retriever import embeds_vectors, rank_proposed
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService, check_query_vector


@dataclass(frozen=True)
class AppProposal:
    """One replica's candidates for an app-wide recall (picklable: Ray returns it)."""

    memories: list[Memory]
    dense: list[float] | None  # cosine per memory; None: proposed by keyword
    store_version: int


def propose(
    service: MemoryService, request: RecallRequest, query_vec: np.ndarray | None
) -> AppProposal:
    """The candidates of ``request.app_name`` in the shards ``service`` holds."""
    retriever = service.retriever_for(request.app_name)
    snap = service.snapshot()
    depth = max(retriever.config.app_candidates, request.top_k)
    if request.uses_dense and query_vec is not None and embeds_vectors(snap):
        check_query_vector(snap, service.query_model(snap), query_vec)
        hits = snap.search_app(request.app_name, query_vec, k=depth, filters=request.filters)
        return AppProposal([h.memory for h in hits], [h.score for h in hits], snap.version)
    keyword = replace(request, top_k=depth, mode="keyword")
    found = retriever.recall_app(snap, keyword, None)
    return AppProposal([r.memory for r in found], None, snap.version)


def rank(
    config: RetrievalConfig,
    proposals: Sequence[AppProposal],
    request: RecallRequest,
    query_vec: np.ndarray | None,
) -> list[RecallResult]:
    """One fused ranking of every replica's proposal (by keyword if any proposed so)."""
    memories = [m for p in proposals for m in p.memories]
    dense = None
    if query_vec is not None and all(p.dense is not None for p in proposals):
        # The whole store's nearest `depth`, ties in shard order (as one snapshot's ANN
        # search orders them): BM25 and ranks are then over the same candidates.
        scored = [(s, m) for p in proposals for s, m in zip(p.dense or (), p.memories, strict=True)]
        scored.sort(key=lambda pair: -pair[0])
        scored = scored[: max(config.app_candidates, request.top_k)]
        dense, memories = [s for s, _ in scored], [m for _, m in scored]
    return rank_proposed(
        config,
        memories,
        dense,
        request.app_name,
        request.query,
        query_vec,
        request.top_k,
        request.filters,
        request.mode,
        request.now,
        budget_tokens=request.budget_tokens,
    )


def answer(results: list[RecallResult], store_version: int) -> dict[str, Any]:
    """The JSON answer of app-wide recall: each memory names its user."""
    return {
        "memories": [{**r.to_dict(), "user_id": r.memory.user_id} for r in results],
        "store_version": store_version,
    }
