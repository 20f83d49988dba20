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
- ``time``    only for a query with a time intent (:mod:`mnemoray.memory.axes`): 1 for
              a record of a period the query names, less for a record that states
              when (for a "when" question);
- ``recency`` how new the record is (``event_time_end``) among the records
              that answer the query about equally well (see ``RetrievalConfig``);
              off for a question about the past or a named period, counted more
              for one about now.

The signals are fused by a weighted sum of bounded scores:
``score = w_d * cosine + w_b * bm25 / (bm25 + c) + w_e * entity / (entity + 1)
+ w_g * graph + w_t * time + w_r * freshness``. Only candidates some signal ranks (dense
top-``depth``, BM25 > 0, entity > 0, graph > 0, a named period) are returned; exact ties
go to the newer record; each result names the axes that found it (``RecallResult.axes``). Within one
user's recall a record whose words repeat a better-ranked one's is left out.
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

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from mnemoray.compiler.services import MemorySnippet
from mnemoray.errors import StoreCorrupt
from mnemoray.graph import UserGraph
from mnemoray.graph.recall import StatedFact
from mnemoray.memory.axes import (
    distinct,
    found_by,
    period_positions,
    query_time,
    time_signal,
)
from mnemoray.memory.candidates import Candidates
from mnemoray.memory.fusion import (
    BM25_SATURATION,
    fuse,
    reported_contributions,
    signal_ranks,
    top_positions,
)
from mnemoray.memory.keywords import AUTO, KeywordTokenizer
from mnemoray.memory.modes import MODES, Mode  # defined there: the CLI imports it cheaply
from mnemoray.memory.recall_filters import RecallFilters, RetrievalError
from mnemoray.memory.record import Memory
from mnemoray.memory.scopes import visible
from mnemoray.memory.segment import LoadedSegment
from mnemoray.memory.snapshot import StoreSnapshot

SIGNALS: tuple[str, ...] = ("dense", "bm25", "entity", "graph", "time", "recency")
MODE_SIGNALS: dict[str, tuple[str, ...]] = {
    "hybrid": SIGNALS,
    "dense": ("dense",),
    # Also what a store (or a service) without embeddings falls back to.
    "keyword": ("bm25", "entity", "graph", "time"),
}

# Weights of the fused sum; why these values (tuned on the recall benchmark; each
# signal is bounded so a weight is its maximum say):
# - dense 1.0: the primary axis. Recall queries paraphrase ("that flying
#   animal we talked about" for a parrot conversation) and only embeddings
#   see through that.
# - bm25 0.15 of a saturating bm25 / (bm25 + 3): a strong lexical match (a name,
#   a rare word, several terms) adds up to ~0.1, enough to settle close dense
#   calls, too little for one incidental word to beat a clearly better meaning.
# - entity 0.05: explicit names shared with a record's entities; sparse, and
#   its terms are mostly already counted by BM25. With the user's graph: the memories
#   that mention an entity the question names by any alias, by how specific it is.
# - graph 0.25 (mnemoray.graph.recall, only with the user's graph): a memory stating a
#   fact the question asks about (as it holds now, or held before for a question about
#   the past) gains 0.25, one a hop away (the fact's other end, a top hit's entities)
#   up to half that; a memory of a changed fact that no longer holds loses 0.25 when
#   the question asks how things are.
# - recency 0.03 within 0.05 cosine of the best match: a tie-breaker among
#   near-equal answers (the newer statement of a changed fact). A wider window
#   or a larger weight fixes more stale facts but costs paraphrase recall;
#   configure it per deployment.
# - time 0.1 (mnemoray.memory.axes): only for a question with a time intent; a record of
#   the period it names gains 0.1, a "when" answer that states a time a little less.
GRAPH_SEEDS = 3  # the best hits whose entities the graph axis hops from
DEFAULT_WEIGHTS: dict[str, float] = {"dense": 1.0, "bm25": 0.15, "entity": 0.05,
                                     "graph": 0.25, "time": 0.1, "recency": 0.03}


@dataclass(frozen=True)
class RetrievalConfig:
    """How recall ranks. ``mode`` picks the signals, ``weights`` their votes.

    ``depth``: candidates each signal ranks (its top-``depth``; raised to
    top_k when that is larger). ``app_candidates``: ANN candidates an
    app-wide hybrid/dense search fuses over. ``recency_window``: records whose
    dense cosine is within this of the best one count as "about equally
    relevant" and are ordered by time among themselves (narrow enough that a
    changed fact's two statements compete while an unrelated record does not).
    ``recency_half_life_s``: the time scale of freshness
    (1 day: records a few days apart are clearly ordered, minutes apart not).
    ``cache_scopes``: per-user candidate sets (BM25 included) kept warm.
    ``keyword_language``: the language BM25 and entity terms are stemmed in
    (``auto``: told per text; or a Snowball language name such as ``german``).
    """

    mode: Mode = "hybrid"
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    bm25_saturation: float = BM25_SATURATION
    depth: int = 100
    app_candidates: int = 200
    recency_window: float = 0.05
    recency_half_life_s: float = 86_400.0
    cache_scopes: int = 256
    keyword_language: str = AUTO

    def __post_init__(self) -> None:
        check_mode(self.mode)
        object.__setattr__(self, "_tokenizer", KeywordTokenizer(self.keyword_language))
        weights = dict(DEFAULT_WEIGHTS)
        for name, value in dict(self.weights).items():
            if name not in SIGNALS:
                raise RetrievalError(f"unknown signal {name!r}; known: "
                                     f"{', '.join(SIGNALS)}", field="weights")
            if not isinstance(value, (int, float)) or isinstance(value, bool) \
                    or not math.isfinite(value) or value < 0:
                raise RetrievalError("must be a finite number >= 0, "
                                     f"got {value!r}", field=f"weights.{name}")
            weights[name] = float(value)
        object.__setattr__(self, "weights", weights)
        if not (isinstance(self.bm25_saturation, (int, float))
                and math.isfinite(self.bm25_saturation) and self.bm25_saturation > 0):
            raise RetrievalError("must be a positive number, "
                                 f"got {self.bm25_saturation!r}", field="bm25_saturation")
        for name in ("depth", "app_candidates", "cache_scopes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise RetrievalError(f"must be a positive integer, got {value!r}", field=name)
        if not isinstance(self.recency_window, (int, float)) or self.recency_window < 0:
            raise RetrievalError(f"must be >= 0, got {self.recency_window!r}",
                                 field="recency_window")
        if not isinstance(self.recency_half_life_s, (int, float)) \
                or not self.recency_half_life_s > 0:
            raise RetrievalError("must be > 0, got "
                                 f"{self.recency_half_life_s!r}", field="recency_half_life_s")

    @property
    def tokenizer(self) -> KeywordTokenizer:
        """The keyword index's tokenizer (``keyword_language``: ``auto`` or a Snowball
        language; :mod:`mnemoray.memory.keywords`)."""
        return self._tokenizer  # type: ignore[attr-defined,no-any-return]

    def active(self, mode: str | None = None) -> dict[str, float]:
        """Signal -> weight for a mode (weight 0 turns a signal off)."""
        return {s: self.weights[s] for s in MODE_SIGNALS[check_mode(mode or self.mode)]
                if self.weights[s] > 0}


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise RetrievalError(f"{mode!r} is not one of {', '.join(MODES)}", field="mode")
    return mode


@dataclass(frozen=True)
class RecallResult:
    """One recalled memory. ``signals``: raw value of each active signal (dense
    cosine, BM25 score, entity overlap, time in [0, 1] when the query has a time
    intent, recency in [0, 1]) and ``<signal>_rank`` for each signal that ranked it
    (1 = best). ``axes``: the axes that found or raised it
    (:func:`mnemoray.memory.axes.found_by`). ``facts``: the typed facts it states, with
    their validity, where the user has an entity graph."""

    memory: Memory
    score: float
    signals: dict[str, float]
    axes: tuple[str, ...] = ()
    facts: tuple[StatedFact, ...] = ()
    #: What each signal added to ``score`` (``score == 1 + sum`` for a ranked record):
    #: the fusion's own terms (:func:`mnemoray.memory.fusion.fuse`), shown on ``explain``.
    contributions: dict[str, float] = field(default_factory=dict)

    @property
    def time(self) -> float:
        """When the remembered events happened (their end), else when it was stored."""
        m = self.memory
        return m.event_time_end if m.event_time_end is not None else m.created_at

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        """The one JSON form of a recalled memory: CLI, HTTP, MCP and agent tools.
        ``explain``: with ``contributions`` (what each signal added to the score)."""
        m = self.memory
        out = {"memory_id": m.memory_id, "app_name": m.app_name, "kind": m.kind,
               "text": m.text,
               "score": round(float(self.score), 6), "date": iso_date(self.time),
               "signals": dict(self.signals), "axes": list(self.axes),
               "topics": list(m.topics),
               "key_facts": list(m.key_facts),
               "provenance": {"session_id": m.session_id,
                              "source_event_ids": list(m.source_event_ids),
                              "event_time_start": m.event_time_start,
                              "event_time_end": m.event_time_end,
                              "created_at": m.created_at}}
        # Seed 004 outcomes, only where a summary had some (most records have none).
        for name in ("open_threads", "decisions", "commitments"):
            if getattr(m, name):
                out[name] = list(getattr(m, name))
        if m.agent_name:  # an agent-only memory (mnemoray.memory.scopes)
            out["agent_name"] = m.agent_name
        if self.facts:  # what it states, and whether that still holds
            out["facts"] = [{"relation": f.relation, "subject": f.subject, "object": f.object,
                             "valid_from": iso_date(f.valid_from),
                             "valid_to": iso_date(f.valid_to), "holds": f.holds}
                            for f in self.facts]
        if explain:
            out["contributions"] = dict(self.contributions)
        return out

    def snippet(self) -> MemorySnippet:
        """What the compiler shows the model of this memory."""
        return MemorySnippet.from_recalled(self.to_dict())


def iso_date(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def rank_candidates(cands: Candidates, query: str, query_vec: np.ndarray | None, top_k: int,
                    filters: RecallFilters, config: RetrievalConfig, mode: str,
                    now: float | None = None, extra_mask: np.ndarray | None = None,
                    one_user: bool = True, graph: UserGraph | None = None,
                    ) -> list[RecallResult]:
    """Top-k of one candidate set for a query (the whole ranking step). The query's time
    intent (read against ``filters.reference_time``, else ``now``) adds the time axis and
    sets how much recency counts (:mod:`mnemoray.memory.axes`). ``one_user``: the set is
    one user's, so a record repeating a better one's words is left out (app-wide, two
    users' equal words are two memories). ``graph``: the user's entity graph; with it the
    entity axis resolves the names the query says and the graph axis follows the facts
    it asks and one hop from the best hits (:mod:`mnemoray.graph.recall`); without
    one (no graph kept, app-wide recall) entity is the overlap of words with the
    records' entities and there is no graph axis."""
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
    gq = gr.query(query) if gr is not None and ("entity" in weights or "graph" in weights) \
        else None
    if "entity" in weights:
        entity = gr.entity_signal(gq) if gr is not None and gq is not None and gq.entities \
            else None
        # Where the graph tells no memory apart by the names the query says (it knows
        # none of them, or each is in every memory that names anything: "African Grey"
        # in a one-session store), the query still ranks by the words it shares with the
        # records' entities, as it does without a graph.
        signals["entity"] = entity if entity is not None and entity.any() \
            else cands.entity_index(config.tokenizer).scores(query).astype(np.float64)
    depth = max(config.depth, top_k)
    qt = query_time(query, filters.reference_time if filters.reference_time is not None
                    else now)
    ranks: dict[str, np.ndarray] = {}  # taken once, for the time axis and fusion
    if "time" in weights or "recency" in weights:
        if "recency" in weights:  # off (absent) for the past or a named period
            factor = qt.recency_factor()
            weights = {k: v * (factor if k == "recency" else 1.0) for k, v in weights.items()
                       if k != "recency" or factor > 0}
        if "time" in weights and qt.active:
            # Only the records the query looks at: those a relevance signal ranks, and
            # those of a period it names.
            looked = np.zeros(cands.size, dtype=bool)
            for name, values in signals.items():
                ranks[name] = signal_ranks(name, values, eligible, depth)
                looked |= ranks[name] > 0
            looked[period_positions(qt, cands.t_start, cands.t_end, eligible)] = True
            signals["time"] = time_signal(qt, np.flatnonzero(looked), cands.time_facts,
                                          cands.t_start, cands.t_end, cands.size)
    fused = fuse(signals, eligible, weights, cands.t_end, depth, config.recency_window,
                 config.recency_half_life_s, config.bm25_saturation, known_ranks=ranks)
    if "graph" in weights and gr is not None and gq is not None:
        # One hop from the best hits of the other axes: a second fusion with the graph.
        seeds = top_positions(fused.score, cands.t_end, cands.memory_ids, GRAPH_SEEDS)
        signals["graph"] = gr.graph_signal(gq, past=qt.intent.about_past,
                                           present=qt.present, seeds=seeds)
        fused = fuse(signals, eligible, weights, cands.t_end, depth, config.recency_window,
                     config.recency_half_life_s, config.bm25_saturation,
                     known_ranks=fused.ranks)
    score, ranks, fresh = fused.score, fused.ranks, fused.fresh
    # A few spare places: records that repeat a better one's words are left out.
    if one_user:
        ranked = top_positions(score, cands.t_end, cands.memory_ids, top_k * 2 + 8)
        positions = distinct(ranked, cands.key_text, top_k)
    else:
        positions = top_positions(score, cands.t_end, cands.memory_ids, top_k)
    results = []
    for pos, memory in zip(positions, cands.memories(positions), strict=True):
        sig: dict[str, float] = {}
        for name in weights:
            if name == "recency":
                if fresh is not None:
                    sig["recency"] = round(float(fresh[pos]), 6)
                continue
            if name not in signals:  # time without a time intent, graph without a graph
                continue
            sig[name] = round(float(signals[name][pos]), 6)
            if ranks[name][pos]:
                sig[f"{name}_rank"] = int(ranks[name][pos])
        contributions = reported_contributions(
            {name: float(values[pos]) for name, values in fused.contributions.items()},
            float(score[pos]))
        results.append(RecallResult(memory, float(score[pos]), sig, found_by(sig),
                                    gr.facts_at(int(pos)) if gr is not None else (),
                                    contributions))
    return results


# -- the retriever: scopes, caching -----------------------------------------------
class Retriever:
    """Ranks recall queries over store snapshots, caching candidate sets per scope.

    A user's candidate set is keyed by the segments (and spans) that hold the
    user's rows plus the snapshot's tombstone files, so a write to another
    user, or a new segment elsewhere, keeps it warm; it never outlives a
    forget that could touch it.
    """

    def __init__(self, config: RetrievalConfig | None = None) -> None:
        self.config = config or RetrievalConfig()
        self._cache: OrderedDict[Hashable, Candidates] = OrderedDict()
        self._lock = threading.Lock()

    def _scope(self, snap: StoreSnapshot, spans: list[tuple[LoadedSegment, tuple[int, int]]],
               scope: tuple[str, str | None]) -> Candidates:
        # Tombstone files are only ever appended (a compaction that retires some
        # also rewrites the segments, renaming them): count + last name identify them.
        tombs = snap.manifest.tombstones
        key = (scope, tuple((s.shard, s.name, span) for s, span in spans),
               (len(tombs), tombs[-1] if tombs else ""))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        cands = Candidates.from_spans(snap, spans)
        with self._lock:
            self._cache[key] = cands
            # Drop older versions of this scope first, then the least recently used.
            for old in [k for k in self._cache if k[0] == scope and k != key]:
                del self._cache[old]
            while len(self._cache) > self.config.cache_scopes:
                self._cache.popitem(last=False)
        return cands

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def user_candidates(self, snap: StoreSnapshot, app: str, user: str) -> Candidates:
        _check_ids(app, user)
        return self._scope(snap, snap.user_spans(app, user), (app, user))

    def search_user(self, snap: StoreSnapshot, app: str, user: str, query: str,
                    query_vec: np.ndarray | None, top_k: int = 5,
                    filters: RecallFilters | Mapping[str, Any] | None = None,
                    mode: str | None = None, now: float | None = None,
                    shared_apps: Sequence[str] = ()) -> list[RecallResult]:
        """Exact hybrid recall over one user's records (only the user's shard is read).

        ``shared_apps``: other apps whose records of the SAME user join the candidate set
        (the caller decided they consent: mnemoray.memory.scopes); one fused ranking."""
        _check_query(query)
        mode = check_mode(mode or self.config.mode)
        flt = RecallFilters.of(filters)
        shared = tuple(a for a in dict.fromkeys(shared_apps) if a != app)
        if shared:
            _check_ids(app, user)
            spans = list(snap.user_spans(app, user))  # a copy: a view may cache its list
            for other in shared:
                _check_ids(other, user)
                spans.extend(snap.user_spans(other, user))
            cands = self._scope(snap, spans, (app, user, *shared))
        else:
            cands = self.user_candidates(snap, app, user)
        vec = None if snap.manifest.keyword_only else query_vec
        view = visible(cands.app_names, cands.agent_names, app, flt.agent_name) \
            if cands.size else None
        return rank_candidates(cands, query, vec, top_k, flt, self.config, mode, now,
                               extra_mask=view, graph=user_graph(snap, app, user))

    def search_app(self, snap: StoreSnapshot, app: str, query: str,
                   query_vec: np.ndarray | None, top_k: int = 5,
                   filters: RecallFilters | Mapping[str, Any] | None = None,
                   mode: str | None = None, now: float | None = None) -> list[RecallResult]:
        """Recall across an app's users.

        hybrid / dense: the app's ``app_candidates`` nearest records by ANN
        (filters applied inside the index search), re-ranked with BM25, entity
        and recency computed over those candidates. keyword (or no vectors):
        BM25 + entity over every record of the app (built once per snapshot).
        """
        _check_query(query)
        _check_ids(app, "-")
        mode = check_mode(mode or self.config.mode)
        flt = RecallFilters.of(filters)
        dense_ok = query_vec is not None and not snap.manifest.keyword_only \
            and snap.manifest.embedding_model is not None
        if mode == "keyword" or not dense_ok:
            cands = self._scope(snap, snap.app_spans(app), (app, None))
            return rank_candidates(cands, query, None, top_k, flt, self.config, "keyword", now,
                                   extra_mask=visible(cands.app_names, cands.agent_names, app,
                                                      flt.agent_name), one_user=False)
        depth = max(self.config.app_candidates, top_k)
        hits = snap.search_app(app, query_vec, k=depth, filters=flt)
        return rank_proposed(self.config, [h.memory for h in hits], [h.score for h in hits],
                             app, query, query_vec, top_k, flt, mode, now)


def rank_proposed(config: RetrievalConfig, memories: list[Memory],
                  dense: Sequence[float] | None, app: str, query: str,
                  query_vec: np.ndarray | None, top_k: int, flt: RecallFilters,
                  mode: str, now: float | None = None,
                  one_user: bool = False) -> list[RecallResult]:
    """The last step of app-wide recall: one fused ranking of the records proposed for
    ``app`` (the nearest by ANN with their cosine in ``dense``, or the keyword best with
    ``dense`` None), whether one snapshot or each shard's replica proposed them."""
    _check_query(query)
    vector = None if dense is None else np.asarray(dense, dtype=np.float64)
    cands = Candidates.from_memories(memories, vector)
    if vector is None:
        query_vec, mode = None, "keyword"
    return rank_candidates(cands, query, query_vec, top_k, flt, config, mode, now,
                           extra_mask=visible(cands.app_names, cands.agent_names, app,
                                              flt.agent_name), one_user=one_user)


def user_graph(snap: StoreSnapshot, app: str, user: str) -> UserGraph | None:
    """The user's entity graph in ``snap``; None where there is none to ask (a store
    that keeps no graph, a damaged graph shard): recall then goes without the graph."""
    view = getattr(snap, "graph", None)
    if view is None:
        return None
    try:
        return view.user(app, user)  # type: ignore[no-any-return]
    except StoreCorrupt:
        return None


def _check_query(query: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise RetrievalError("must be a non-empty string", field="query")


def _check_ids(app: str, user: str) -> None:
    for name, value in (("app_name", app), ("user_id", user)):
        if not isinstance(value, str) or not value:
            raise RetrievalError("must be a non-empty string", field=name)

