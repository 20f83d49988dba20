"""Hybrid multi-axis recall: dense, BM25, entity, graph, time and recency signals, fused
by a weighted sum.

Every search works on a *candidate set*: one user's live rows (exact, read
from the user's contiguous slice of each segment of the user's shard, never
anything else), or an app's ANN candidates. Per candidate it computes

- ``dense``   cosine of the query and the record's embedded ``key_text``;
- ``bm25``    BM25 of the query over the same records' ``key_text``;
- ``entity``  with the user's entity graph: the memories that mention an entity the
              query names by any alias, each entity by how specific it is; without
              one, or where the names the query says tell no memory apart: overlap
              of the query's terms with the record's ``entities``
              (a fully named entity counts 1, a partly named one its share);
- ``graph``   only with the user's graph (:mod:`mnemoray.graph.recall`): the memories
              of the facts the query asks (now, or before for the past), one hop
              from them and from the best hits of the other signals; negative for a
              memory of a changed fact that no longer holds when the query asks now;
- ``time``    only for a query with a time intent (:mod:`mnemoray.memory.recall.axes`): 1 for
              a record of a period the query names, less for a record that states
              when (for a "when" question);
- ``speaker`` only for a question about the user's own words ("do I", "my") or the
              assistant's ("you said", :mod:`mnemoray.memory.recall.speakers`): the
              share of the record's words that side said; it re-orders, never finds;
- ``recency`` how new the record is (``event_time_end``) among the records
              that answer the query about equally well (see ``RetrievalConfig``);
              off for a question about the past or a named period, counted more
              for one about now.

The signals are fused by a weighted sum of bounded scores:
``score = w_d * cosine + w_b * bm25 / (bm25 + c) + w_e * entity / (entity + 1)
+ w_g * graph + w_t * time + w_r * freshness + w_s * speaker``. Only candidates some
signal ranks (dense top-``depth``, BM25 > 0, entity > 0, graph > 0, a named period) are
returned; exact ties
go to the newer record; each result names the axes that found it (``RecallResult.axes``). A record
whose words repeat a better-ranked one's is left out, and a fact gives its place to the
chunk of its turn (:mod:`mnemoray.memory.recall.picking`).
Why not reciprocal rank fusion: RRF turns ANY lexical hit into a vote worth as
much as a dense rank, so incidental words ("town", "year") lift unrelated records
over paraphrase matches; bounded scores let each signal have only its weight's say
(comparison on benchmarks/recall_quality.py and longconv_bench.py: benchmarks/README.md).
Filters (``RecallFilters``) are masks applied BEFORE ranking, so a filtered
query returns its own top-k rather than the survivors of an unfiltered one.
Forgotten (tombstoned) rows are never candidates; expired rows (TTL) are
masked at query time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mnemoray.graph import UserGraph
from mnemoray.memory.recall.axes import (
    found_by,
    period_positions,
    query_time,
    time_signal,
)
from mnemoray.memory.recall.candidates import Candidates
from mnemoray.memory.recall.config import RetrievalConfig, check_ids, check_query
from mnemoray.memory.recall.fusion import fuse, reported_contributions, signal_ranks, top_positions
from mnemoray.memory.recall.inputs import ScopeCache, user_graph
from mnemoray.memory.recall.picking import joined, pick
from mnemoray.memory.recall.request import RecallRequest, resolve_recall
from mnemoray.memory.recall.result import RecallResult
from mnemoray.memory.recall.speakers import asked_side, speaker_signal
from mnemoray.memory.records.filters import RecallFilters, RetrievalError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.scopes import visible
from mnemoray.memory.store.snapshot import StoreSnapshot

GRAPH_SEEDS = 3  # the best hits whose entities the graph axis hops from
PICK_DEPTH = 50  # ranked records a budgeted recall reads to fill its budget


def rank_candidates(
    cands: Candidates,
    query: str,
    query_vec: np.ndarray | None,
    top_k: int,
    filters: RecallFilters,
    config: RetrievalConfig,
    mode: str,
    now: float | None = None,
    extra_mask: np.ndarray | None = None,
    one_user: bool = True,
    graph: UserGraph | None = None,
    budget_tokens: int | None = None,
) -> list[RecallResult]:
    """Top-k of one candidate set for a query (the whole ranking step). The query's time
    intent (read against ``filters.reference_time``, else ``now``) adds the time axis and
    sets how much recency counts (:mod:`mnemoray.memory.recall.axes`). ``one_user``: the set is
    one user's, so a record repeating a better one's words is left out (app-wide, two
    users' equal words are two memories). ``graph``: the user's entity graph; with it the
    entity axis resolves the names the query says and the graph axis follows the facts
    it asks and one hop from the best hits (:mod:`mnemoray.graph.recall`); without
    one (no graph kept, app-wide recall) entity is the overlap of words with the
    records' entities and there is no graph axis. No result repeats a better one's
    words, and ``budget_tokens`` keeps the best that fit (:mod:`.picking`)."""
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise RetrievalError(f"must be a positive integer, got {top_k!r}", field="top_k")
    if not cands.size:
        return []
    now = time.time() if now is None else now
    eligible = cands.live(now)
    if not filters.empty:
        eligible &= filters.mask(cands.session_ids, cands.kinds, cands.t_start, cands.t_end)
    if extra_mask is not None:
        eligible &= extra_mask
    if not eligible.any():
        return []
    weights = config.active(mode)
    signals: dict[str, np.ndarray] = {}
    if "dense" in weights:
        dense = cands.dense(query_vec)
        if dense is None:  # no vectors here or no query vector: keyword fallback
            weights = config.active("keyword")
        else:
            signals["dense"] = dense
    if "bm25" in weights:
        signals["bm25"] = cands.bm25(config.tokenizer).scores(query).astype(np.float64)
    # The graph also says which facts each result states (their validity), so it is
    # laid over the candidates whenever the user has one (built once per candidate set).
    gr = cands.graph_recall(graph) if graph is not None and graph.entities else None
    gq = gr.query(query) if gr is not None and ("entity" in weights or "graph" in weights) else None
    if "entity" in weights:
        entity = gr.entity_signal(gq) if gr is not None and gq is not None and gq.entities else None
        # Where the graph tells no memory apart by the names the query says (it knows
        # none of them, or each is in every memory that names anything: "African Grey"
        # in a one-session store), the query still ranks by the words it shares with the
        # records' entities, as it does without a graph.
        signals["entity"] = (
            entity
            if entity is not None and entity.any()
            else cands.entity_index(config.tokenizer).scores(query).astype(np.float64)
        )
    depth = max(config.depth, top_k)
    qt = query_time(query, filters.reference_time if filters.reference_time is not None else now)
    ranks: dict[str, np.ndarray] = {}  # taken once, for the time axis and fusion
    if "time" in weights or "recency" in weights:
        if "recency" in weights:  # off (absent) for the past or a named period
            factor = qt.recency_factor()
            weights = {
                k: v * (factor if k == "recency" else 1.0)
                for k, v in weights.items()
                if k != "recency" or factor > 0
            }
        boost = qt.time_factor()
        if "time" in weights and boost != 1.0:
            weights = {**weights, "time": weights["time"] * boost}
        if "time" in weights and qt.active:
            # Only the records the query looks at: those a relevance signal ranks, and
            # those of a period it names.
            looked = np.zeros(cands.size, dtype=bool)
            for name, values in signals.items():
                ranks[name] = signal_ranks(name, values, eligible, depth)
                looked |= ranks[name] > 0
            looked[period_positions(qt, cands.t_start, cands.t_end, eligible)] = True
            signals["time"] = time_signal(
                qt, np.flatnonzero(looked), cands.time_facts, cands.t_start, cands.t_end, cands.size
            )
    side = asked_side(query)
    if "speaker" in weights:
        said = speaker_signal(side, cands.user_shares())
        if said is not None:
            signals["speaker"] = said
    fused = fuse(
        signals,
        eligible,
        weights,
        cands.t_end,
        depth,
        config.recency_window,
        config.recency_half_life_s,
        config.bm25_saturation,
        known_ranks=ranks,
    )
    if "graph" in weights and gr is not None and gq is not None:
        # One hop from the best hits of the other axes: a second fusion with the graph.
        seeds = top_positions(fused.score, cands.t_end, cands.memory_ids, GRAPH_SEEDS)
        signals["graph"] = gr.graph_signal(
            gq, past=qt.intent.about_past, present=qt.present, seeds=seeds
        )
        fused = fuse(
            signals,
            eligible,
            weights,
            cands.t_end,
            depth,
            config.recency_window,
            config.recency_half_life_s,
            config.bm25_saturation,
            known_ranks=fused.ranks,
        )
    score, ranks, fresh = fused.score, fused.ranks, fused.fresh
    # Spare places: records that repeat a better one's words are left out, and a budget
    # may pass over long records for shorter ones.
    spare = top_k * 2 + 8 if budget_tokens is None else max(top_k * 3, PICK_DEPTH)
    ranked = top_positions(score, cands.t_end, cands.memory_ids, spare)

    def turn_chunks(pos: int) -> list[int]:
        return [p for p in cands.chunks_holding(pos) if eligible[p]]

    picks = pick(
        ranked,
        cands.memories,
        top_k,
        budget_tokens,
        same_words=one_user,
        turn_chunks=turn_chunks,
        join_side=side,
    )
    shown = cands.memories([p.shown for p in picks])
    placed_by = cands.memories([p.ranked for p in picks])
    results = []
    for p, memory, placer in zip(picks, shown, placed_by, strict=True):
        parts = cands.memories(list(p.parts)) if p.parts else []
        if parts:
            memory = joined(parts)
        pos = p.ranked  # what placed it: its own signals, or the fact it stands in for
        sig: dict[str, float] = {}
        for name in weights:
            if name == "recency":
                if fresh is not None:
                    sig["recency"] = round(float(fresh[pos]), 6)
                continue
            if name not in signals:  # time without a time intent, graph without a graph
                continue
            sig[name] = round(float(signals[name][pos]), 6)
            if name in ranks and ranks[name][pos]:
                sig[f"{name}_rank"] = int(ranks[name][pos])
        contributions = reported_contributions(
            {name: float(values[pos]) for name, values in fused.contributions.items()},
            float(score[pos]),
        )
        results.append(
            RecallResult(
                memory,
                float(score[pos]),
                sig,
                found_by(sig),
                gr.facts_at(int(pos)) if gr is not None else (),
                contributions,
                in_place_of=placer.memory_id if p.shown != p.ranked else None,
                joined=tuple(m.memory_id for m in parts if m.memory_id != memory.memory_id),
            )
        )
    return results


# -- the retriever: scopes, caching -----------------------------------------------
class Retriever(ScopeCache):
    """Ranks recall queries over store snapshots, caching candidate sets per scope.

    A user's candidate set is keyed by the segments (and spans) that hold the
    user's rows plus the snapshot's tombstone files, so a write to another
    user, or a new segment elsewhere, keeps it warm; it never outlives a
    forget that could touch it.
    """

    def search_user(
        self,
        snap: StoreSnapshot,
        app: str,
        user: str,
        query: str,
        query_vec: np.ndarray | None,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        now: float | None = None,
        shared_apps: Sequence[str] = (),
    ) -> list[RecallResult]:
        """Exact hybrid recall over one user's records (only the user's shard is read):
        :meth:`recall_user` of the request these arguments resolve to."""
        request = resolve_recall(self.config, app, user, query, top_k, mode, filters, now=now)
        return self.recall_user(snap, request, query_vec, shared_apps)

    def recall_user(
        self,
        snap: StoreSnapshot,
        request: RecallRequest,
        query_vec: np.ndarray | None,
        shared_apps: Sequence[str] = (),
    ) -> list[RecallResult]:
        """Exact hybrid recall over one user's records (only the user's shard is read).

        ``shared_apps``: other apps whose records of the SAME user join the candidate set
        (the caller decided they consent: mnemoray.memory.store.scopes); one fused ranking."""
        app, user, flt = request.app_name, request.user_id, request.filters
        if user is None:
            raise RetrievalError("a one-user recall needs a user", field="user_id")
        shared = tuple(a for a in dict.fromkeys(shared_apps) if a != app)
        if shared:
            spans = list(snap.user_spans(app, user))  # a copy: a view may cache its list
            for other in shared:
                check_ids(other, user)
                spans.extend(snap.user_spans(other, user))
            cands = self._scope(snap, spans, (app, user, *shared))
        else:
            cands = self.user_candidates(snap, app, user)
        vec = None if snap.manifest.keyword_only else query_vec
        view = (
            visible(cands.app_names, cands.agent_names, app, flt.agent_name) if cands.size else None
        )
        return rank_candidates(
            cands,
            request.query,
            vec,
            request.top_k,
            flt,
            self.config,
            request.mode,
            request.now,
            extra_mask=view,
            graph=user_graph(snap, app, user),
            budget_tokens=request.budget_tokens,
        )

    def search_app(
        self,
        snap: StoreSnapshot,
        app: str,
        query: str,
        query_vec: np.ndarray | None,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        now: float | None = None,
    ) -> list[RecallResult]:
        """Recall across an app's users: :meth:`recall_app` of the request these
        arguments resolve to."""
        request = resolve_recall(self.config, app, None, query, top_k, mode, filters, now=now)
        return self.recall_app(snap, request, query_vec)

    def recall_app(
        self, snap: StoreSnapshot, request: RecallRequest, query_vec: np.ndarray | None
    ) -> list[RecallResult]:
        """Recall across an app's users.

        hybrid / dense: the app's ``app_candidates`` nearest records by ANN
        (filters applied inside the index search), re-ranked with BM25, entity
        and recency computed over those candidates. keyword (or no vectors):
        BM25 + entity over every record of the app (built once per snapshot).
        """
        app, flt, top_k = request.app_name, request.filters, request.top_k
        if not request.uses_dense or query_vec is None or not embeds_vectors(snap):
            cands = self._scope(snap, snap.app_spans(app), (app, None))
            return rank_candidates(
                cands,
                request.query,
                None,
                top_k,
                flt,
                self.config,
                "keyword",
                request.now,
                extra_mask=visible(cands.app_names, cands.agent_names, app, flt.agent_name),
                one_user=False,
                budget_tokens=request.budget_tokens,
            )
        depth = max(self.config.app_candidates, top_k)
        assert query_vec is not None  # dense_ok
        hits = snap.search_app(app, query_vec, k=depth, filters=flt)
        return rank_proposed(
            self.config,
            [h.memory for h in hits],
            [h.score for h in hits],
            app,
            request.query,
            query_vec,
            top_k,
            flt,
            request.mode,
            request.now,
            budget_tokens=request.budget_tokens,
        )


def embeds_vectors(snap: StoreSnapshot) -> bool:
    """Whether the store behind ``snap`` holds embeddings a query vector is matched to."""
    m = snap.manifest
    return not m.keyword_only and m.embedding_model is not None


def rank_proposed(
    config: RetrievalConfig,
    memories: list[Memory],
    dense: Sequence[float] | None,
    app: str,
    query: str,
    query_vec: np.ndarray | None,
    top_k: int,
    flt: RecallFilters,
    mode: str,
    now: float | None = None,
    one_user: bool = False,
    budget_tokens: int | None = None,
) -> list[RecallResult]:
    """The last step of app-wide recall: one fused ranking of the records proposed for
    ``app`` (the nearest by ANN with their cosine in ``dense``, or the keyword best with
    ``dense`` None), whether one snapshot or each shard's replica proposed them."""
    check_query(query)
    vector = None if dense is None else np.asarray(dense, dtype=np.float64)
    cands = Candidates.from_memories(memories, vector)
    if vector is None:
        query_vec, mode = None, "keyword"
    return rank_candidates(
        cands,
        query,
        query_vec,
        top_k,
        flt,
        config,
        mode,
        now,
        extra_mask=visible(cands.app_names, cands.agent_names, app, flt.agent_name),
        one_user=one_user,
        budget_tokens=budget_tokens,
    )


# Names other modules import from here (defined in the modules above).
__all__ = ["GRAPH_SEEDS", "Retriever", "embeds_vectors", "rank_candidates", "rank_proposed"]
