"""Hybrid multi-axis recall: dense, BM25, entity, time and recency signals, fused by a
weighted sum.

Every search works on a *candidate set*: one user's live rows (exact, read
from the user's contiguous slice of each segment of the user's shard, never
anything else), or an app's ANN candidates. Per candidate it computes

- ``dense``   cosine of the query and the record's embedded ``key_text``;
- ``bm25``    BM25 of the query over the same records' ``key_text``;
- ``entity``  overlap of the query's terms with the record's ``entities``
              (a fully named entity counts 1, a partly named one its share);
- ``time``    only for a query with a time intent (:mod:`mnemoray.memory.axes`): 1 for
              a record of a period the query names, less for a record that states
              when (for a "when" question);
- ``recency`` how new the record is (``event_time_end``) among the records
              that answer the query about equally well (see ``RetrievalConfig``);
              off for a question about the past or a named period, counted more
              for one about now.

The signals are fused by a weighted sum of bounded scores:
``score = w_d * cosine + w_b * bm25 / (bm25 + c) + w_e * entity / (entity + 1)
+ w_t * time + w_r * freshness``. Only candidates some signal ranks (dense top-``depth``,
BM25 > 0, entity overlap > 0, a named period) are returned; exact ties go to the newer
record; each result names the axes that found it (``RecallResult.axes``). Within one
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
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import sparse

from mnemoray.compiler.services import MemorySnippet
from mnemoray.errors import InvalidInput
from mnemoray.events import EventError, parse_timestamp
from mnemoray.memory.agent_names import check_agent_name
from mnemoray.memory.axes import (
    FOUND,
    TimeFacts,
    distinct,
    found_by,
    period_positions,
    query_time,
    time_facts,
    time_signal,
)
from mnemoray.memory.bm25 import BM25
from mnemoray.memory.index import _slice_scores
from mnemoray.memory.keywords import AUTO, KeywordTokenizer
from mnemoray.memory.modes import MODES, Mode  # defined there: the CLI imports it cheaply
from mnemoray.memory.record import MEMORY_KINDS, Memory
from mnemoray.memory.scopes import visible
from mnemoray.memory.segment import LoadedSegment, rows_to_memories
from mnemoray.memory.snapshot import StoreSnapshot

SIGNALS: tuple[str, ...] = ("dense", "bm25", "entity", "time", "recency")
MODE_SIGNALS: dict[str, tuple[str, ...]] = {
    "hybrid": SIGNALS,
    "dense": ("dense",),
    # Also what a store (or a service) without embeddings falls back to.
    "keyword": ("bm25", "entity", "time"),
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
#   its terms are mostly already counted by BM25.
# - recency 0.03 within 0.05 cosine of the best match: a tie-breaker among
#   near-equal answers (the newer statement of a changed fact). A wider window
#   or a larger weight fixes more stale facts but costs paraphrase recall;
#   configure it per deployment.
# - time 0.1 (mnemoray.memory.axes): only for a question with a time intent; a record of
#   the period it names gains 0.1, a "when" answer that states a time a little less.
DEFAULT_WEIGHTS: dict[str, float] = {"dense": 1.0, "bm25": 0.15, "entity": 0.05,
                                     "time": 0.1, "recency": 0.03}
BM25_SATURATION = 3.0


class RetrievalError(InvalidInput):
    """Bad retrieval input (config, filters, query); ``field`` names it."""


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


def _time(value: Any, name: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_timestamp(value, name)
    except EventError as exc:
        raise RetrievalError(exc.reason, field=exc.field) from exc


@dataclass(frozen=True)
class RecallFilters:
    """Restrict recall before ranking.

    ``session_id``: only that session's records. ``kinds``: only these
    record kinds. ``after`` / ``before`` (epoch seconds or ISO-8601,
    inclusive): only records whose event time span
    [event_time_start, event_time_end] overlaps [after, before]; a record
    with one end missing uses the other, one with neither uses created_at.
    ``reference_time`` (epoch seconds or ISO-8601): not a filter but the "now" a query's
    relative times ("last May") are read against (default: the time of the recall).
    """

    session_id: str | None = None
    after: float | None = None
    before: float | None = None
    kinds: tuple[str, ...] | None = None
    # Not a filter but whose view (mnemoray.memory.scopes): the shared memories plus this
    # agent's own; None: the shared ones only. Carried here so every edge passes it along.
    agent_name: str | None = None
    reference_time: float | None = None

    def __post_init__(self) -> None:
        if self.agent_name is not None:
            check_agent_name(self.agent_name, RetrievalError, "filters.agent_name")
            object.__setattr__(self, "agent_name", self.agent_name or None)
        if self.session_id is not None and (not isinstance(self.session_id, str)
                                            or not self.session_id):
            raise RetrievalError("must be a non-empty string", field="filters.session_id")
        object.__setattr__(self, "after", _time(self.after, "filters.after"))
        object.__setattr__(self, "before", _time(self.before, "filters.before"))
        object.__setattr__(self, "reference_time",
                           _time(self.reference_time, "filters.reference_time"))
        if self.after is not None and self.before is not None and self.after > self.before:
            raise RetrievalError("after is later than before", field="filters")
        if self.kinds is not None:
            kinds = (self.kinds,) if isinstance(self.kinds, str) else self.kinds
            if not isinstance(kinds, Iterable):
                raise RetrievalError("expected a list of memory kinds", field="filters.kinds")
            kinds = tuple(kinds)
            for kind in kinds:
                if kind not in MEMORY_KINDS:
                    raise RetrievalError(f"{kind!r} is not one of "
                                         f"{', '.join(MEMORY_KINDS)}", field="filters.kinds")
            object.__setattr__(self, "kinds", kinds)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> RecallFilters:
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise RetrievalError(f"expected an object, got {type(raw).__name__}", field="filters")
        unknown = set(raw) - {"session_id", "after", "before", "kinds", "agent_name",
                              "reference_time"}
        if unknown:
            raise RetrievalError("unknown filter (known: "
                                 "session_id, after, before, kinds, agent_name, "
                                 "reference_time)",
                                 field=f"filters.{sorted(unknown)[0]}")
        return cls(**raw)

    @classmethod
    def of(cls, value: RecallFilters | Mapping[str, Any] | None) -> RecallFilters:
        return value if isinstance(value, RecallFilters) else cls.from_dict(value)

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "after": self.after, "before": self.before,
                "kinds": list(self.kinds) if self.kinds is not None else None,
                "agent_name": self.agent_name, "reference_time": self.reference_time}

    @property
    def empty(self) -> bool:
        """No row filter (``agent_name`` is a view, applied by :func:`rank_candidates`)."""
        return self.session_id is None and self.after is None and self.before is None \
            and self.kinds is None

    def mask(self, session_ids: np.ndarray, kinds: np.ndarray, t_start: np.ndarray,
             t_end: np.ndarray) -> np.ndarray:
        """Keep-mask over aligned candidate arrays (times already with their fallbacks)."""
        keep = np.ones(len(t_end), dtype=bool)
        if self.session_id is not None:
            keep &= session_ids == self.session_id
        if self.kinds is not None:
            keep &= np.isin(kinds, list(self.kinds))
        if self.after is not None:
            keep &= t_end >= self.after
        if self.before is not None:
            keep &= t_start <= self.before
        return keep

    def mask_table(self, table: pa.Table) -> np.ndarray:
        """The same mask over a segment's Arrow rows (a snapshot ``mask_fn``)."""
        start, end = event_times(table)
        empty = np.empty(0, dtype=object)
        sessions = table["session_id"].to_numpy(zero_copy_only=False) \
            if self.session_id is not None else empty
        kinds = table["kind"].to_numpy(zero_copy_only=False) if self.kinds is not None else empty
        return self.mask(sessions, kinds, start, end)


def event_times(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) event times per row: a missing end uses the other, both missing created_at."""
    def floats(name: str) -> np.ndarray:
        return table[name].to_numpy(zero_copy_only=False).astype(np.float64)

    start, end, created = floats("event_time_start"), floats("event_time_end"), floats("created_at")
    start = np.where(np.isnan(start), end, start)
    end = np.where(np.isnan(end), start, end)
    return np.where(np.isnan(start), created, start), np.where(np.isnan(end), created, end)


@dataclass(frozen=True)
class RecallResult:
    """One recalled memory. ``signals``: raw value of each active signal (dense
    cosine, BM25 score, entity overlap, time in [0, 1] when the query has a time
    intent, recency in [0, 1]) and ``<signal>_rank`` for each signal that ranked it
    (1 = best). ``axes``: the axes that found or raised it
    (:func:`mnemoray.memory.axes.found_by`)."""

    memory: Memory
    score: float
    signals: dict[str, float]
    axes: tuple[str, ...] = ()

    @property
    def time(self) -> float:
        """When the remembered events happened (their end), else when it was stored."""
        m = self.memory
        return m.event_time_end if m.event_time_end is not None else m.created_at

    def to_dict(self) -> dict[str, Any]:
        """The one JSON form of a recalled memory: CLI, HTTP, MCP and agent tools."""
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
        return out

    def snippet(self) -> MemorySnippet:
        """What the compiler shows the model of this memory."""
        return MemorySnippet.from_recalled(self.to_dict())


def iso_date(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


# -- pure functions over candidate arrays ------------------------------------
def rank_desc(values: np.ndarray, eligible: np.ndarray, depth: int,
              positive_only: bool = False) -> np.ndarray:
    """1-based ranks of the top ``depth`` eligible values (0 = not ranked).

    Equal values share the better rank. ``positive_only``: a zero (no
    evidence) is never ranked.
    """
    ok = eligible & np.isfinite(values)
    if positive_only:
        ok &= values > 0
    idx = np.flatnonzero(ok)
    ranks = np.zeros(len(values), dtype=np.int32)
    if not len(idx):
        return ranks
    if len(idx) > depth:
        idx = idx[np.argpartition(-values[idx], depth - 1)[:depth]]
    order = idx[np.argsort(-values[idx], kind="stable")]
    sorted_neg = -values[order]
    ranks[order] = np.searchsorted(sorted_neg, sorted_neg, side="left") + 1
    return ranks


def freshness(times: np.ndarray, dense: np.ndarray, eligible: np.ndarray,
              window: float, half_life: float = 86_400.0) -> np.ndarray:
    """Recency in [0, 1) among the records about as relevant as the best one.

    A record qualifies when its dense cosine is within ``window`` of the best
    eligible one. Its freshness is ``d(t) - d(oldest)`` with
    ``d(t) = 0.5 ** ((newest - t) / half_life)``: the newest qualified record
    gets nearly 1 when the stalest is many half-lives older, a record as old
    as the stalest gets 0, and records minutes apart (one conversation) get
    ~0, so only a real age gap reorders anything. Unqualified records get 0.
    """
    out = np.zeros(len(times), dtype=np.float64)
    ok = eligible & np.isfinite(dense)
    if not ok.any():
        return out
    qualified = ok & (dense >= dense[ok].max() - window)
    t = times[qualified]
    hi, lo = float(t.max()), float(t.min())
    out[qualified] = 0.5 ** ((hi - t) / half_life) - 0.5 ** ((hi - lo) / half_life)
    return out


def fuse(signals: Mapping[str, np.ndarray], eligible: np.ndarray, weights: Mapping[str, float],
         times: np.ndarray, depth: int = 100, recency_window: float = 0.05,
         recency_half_life: float = 86_400.0, bm25_saturation: float = BM25_SATURATION,
         ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray | None]:
    """Fused scores, per-signal ranks and freshness (None: recency off) for aligned arrays.

    ``signals`` holds the raw relevance arrays (dense, bm25, entity, and time for a
    query with a time intent) for the active signals; recency (if weighted) is derived
    from ``times`` and dense. The time axis ranks (finds) only the records it matched
    in full (a named period, :data:`mnemoray.memory.axes.FOUND`); below that it only
    adds its weighted value. Candidates no signal ranked score 0; the others > 0.
    """
    ranks: dict[str, np.ndarray] = {}
    for name, values in signals.items():
        if name in weights and name != "recency":
            if name == "time":
                values = np.where(values >= FOUND, values, 0.0)
            ranks[name] = rank_desc(values, eligible, depth, positive_only=name != "dense")
    n = len(times)
    voted = np.zeros(n, dtype=bool)
    for r in ranks.values():
        voted |= r > 0
    total = np.zeros(n, dtype=np.float64)
    if "dense" in ranks:
        dense = signals["dense"]
        total += weights["dense"] * np.where(np.isfinite(dense), dense, 0.0)
    if "bm25" in ranks:
        bm25 = signals["bm25"]
        total += weights["bm25"] * bm25 / (bm25 + bm25_saturation)
    if "entity" in ranks:
        entity = signals["entity"]
        total += weights["entity"] * entity / (entity + 1.0)
    if "time" in ranks:
        total += weights["time"] * signals["time"]
    fresh = None
    if "recency" in weights and "dense" in signals:
        fresh = freshness(times, signals["dense"], eligible, recency_window, recency_half_life)
        total += weights["recency"] * fresh
    # Cosines reach -1: a constant shift keeps every voted record's score > 0
    # (unvoted ones are 0) without changing the order. score = 1 + fused relevance.
    score = np.where(voted, total + 1.0 + 1e-9, 0.0)
    return score, ranks, fresh


def top_positions(score: np.ndarray, times: np.ndarray, tiebreak: Sequence[str],
                  top_k: int) -> list[int]:
    """Positions of the best ``top_k`` scores > 0; ties go to the newer record, then the id."""
    cand = np.flatnonzero(score > 0)
    if len(cand) > top_k * 4 + 16:
        cand = cand[np.argpartition(-score[cand], top_k - 1)[:top_k]]
        # Keep every candidate tied with the k-th so the tie-break is exact.
        cutoff = score[cand].min()
        cand = np.flatnonzero(score >= cutoff)
    return sorted(cand.tolist(), key=lambda i: (-score[i], -times[i], tiebreak[i]))[:top_k]


# -- keyword indexes over a candidate set ------------------------------------
class EntityIndex:
    """Query-term overlap with each record's entities, as one sparse column sum.

    Cell (record, term) = sum over the record's entities containing the term
    of 1 / (terms in that entity): naming "African Grey" in full scores 1,
    naming "grey" alone 0.5.
    """

    def __init__(self, entities: Sequence[Sequence[str]],
                 tokenizer: KeywordTokenizer | None = None) -> None:
        self.tokenizer = tokenizer or KeywordTokenizer()
        self.tokenizer_version = self.tokenizer.version
        vocab: dict[str, int] = {}
        languages: set[str] = set()
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for i, names in enumerate(entities):
            cells: dict[int, float] = {}
            for name in names:
                found, language = self.tokenizer.analyze(name)
                languages.add(language)
                toks = set(found)
                for tok in toks:
                    j = vocab.setdefault(tok, len(vocab))
                    cells[j] = cells.get(j, 0.0) + 1.0 / len(toks)
            rows.extend([i] * len(cells))
            cols.extend(cells)
            vals.extend(cells.values())
        self.vocab = vocab
        self.languages = frozenset(languages)
        self.size = len(entities)
        self._matrix = sparse.csc_matrix((np.asarray(vals, dtype=np.float32), (rows, cols)),
                                         shape=(self.size, len(vocab)), dtype=np.float32)

    def scores(self, query: str) -> np.ndarray:
        terms = self.tokenizer.query_terms(query, self.languages)
        ids = sorted({self.vocab[t] for t in terms if t in self.vocab})
        if not ids or not self.size:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._matrix[:, ids].sum(axis=1)).ravel()


# -- candidate sets ------------------------------------------------------------
_COLUMNS = ["memory_id", "app_name", "session_id", "kind", "key_text", "entities",
            "event_time_start", "event_time_end", "created_at", "expires_at", "agent_name"]


@dataclass
class _Part:
    seg: LoadedSegment
    start: int
    end: int
    local: np.ndarray | None  # live rows relative to start; None = the whole span


class Candidates:
    """Aligned arrays over one scope's records, plus lazily built keyword indexes.

    Built once per (scope, snapshot contents) and reused by every query:
    nothing here depends on the query or the clock.
    """

    def __init__(self, table: pa.Table, parts: list[_Part] | None = None,
                 memories: list[Memory] | None = None, dense: np.ndarray | None = None) -> None:
        self.parts = parts or []
        self._memories = memories  # a transient set (app ANN candidates)
        self._built: dict[int, Memory] = {}  # position -> record, materialized on demand
        self._dense = dense
        self.size = table.num_rows
        self.memory_ids = table["memory_id"].to_pylist()
        self.session_ids = table["session_id"].to_numpy(zero_copy_only=False)
        self.kinds = table["kind"].to_numpy(zero_copy_only=False)
        # Scope columns (mnemoray.memory.scopes): owner app, and agent ("" = shared).
        self.app_names = table["app_name"].to_numpy(zero_copy_only=False)
        self.agent_names = table["agent_name"].fill_null("").to_numpy(zero_copy_only=False)
        self.t_start, self.t_end = event_times(table)
        self.expires = table["expires_at"].to_numpy(zero_copy_only=False).astype(np.float64)
        self._table = table
        self._bm25: BM25 | None = None
        self._entities: EntityIndex | None = None
        self._time_facts: dict[int, TimeFacts] = {}  # position -> what its words say of time
        self._lock = threading.Lock()
        self.built_at = time.time()

    # keyword indexes, built on first use ------------------------------------
    # Each is rebuilt when asked for with another tokenizer (version or language):
    # an index is never queried with terms of a tokenizer other than its own.
    def bm25(self, tokenizer: KeywordTokenizer | None = None) -> BM25:
        tokenizer = tokenizer or KeywordTokenizer()
        index = self._bm25
        if index is None or index.tokenizer_version != tokenizer.version:
            with self._lock:
                index = self._bm25
                if index is None or index.tokenizer_version != tokenizer.version:
                    index = self._bm25 = BM25(self._table["key_text"].to_pylist(),
                                              tokenizer=tokenizer)
        return index

    def entity_index(self, tokenizer: KeywordTokenizer | None = None) -> EntityIndex:
        tokenizer = tokenizer or KeywordTokenizer()
        index = self._entities
        if index is None or index.tokenizer_version != tokenizer.version:
            with self._lock:
                index = self._entities
                if index is None or index.tokenizer_version != tokenizer.version:
                    index = self._entities = EntityIndex(
                        [e or () for e in self._table["entities"].to_pylist()], tokenizer)
        return index

    def key_text(self, pos: int) -> str:
        return self._table["key_text"][pos].as_py() or ""

    def time_facts(self, pos: int) -> TimeFacts:
        """What record ``pos`` says of time (resolved once, then kept)."""
        found = self._time_facts.get(pos)
        if found is None:
            found = self._time_facts[pos] = time_facts(self.key_text(pos),
                                                       float(self.t_start[pos]))
        return found

    # query-time arrays ----------------------------------------------------------
    def live(self, now: float) -> np.ndarray:
        return ~(self.expires <= now)  # NaN (no TTL) compares False

    def dense(self, query_vec: np.ndarray | None) -> np.ndarray | None:
        if self._dense is not None:
            return self._dense
        if query_vec is None or not self.parts or self.parts[0].seg.vectors is None:
            return None
        q = np.ascontiguousarray(query_vec, dtype=np.float32).reshape(1, -1)
        chunks = []
        for p in self.parts:
            assert p.seg.vectors is not None
            if q.shape[1] != p.seg.vectors.shape[1]:
                raise RetrievalError(f"expected dimension {p.seg.vectors.shape[1]}, "
                                     f"got {q.shape[1]}", field="query_vec")
            s = _slice_scores(p.seg.vectors, q, p.start, p.end)[0]
            chunks.append(s if p.local is None else s[p.local])
        return np.concatenate(chunks).astype(np.float64) if chunks else np.zeros(0)

    def memories(self, positions: Sequence[int]) -> list[Memory]:
        if self._memories is not None:
            return [self._memories[i] for i in positions]
        # Records are immutable and this set lives as long as its snapshot's contents: a
        # record built once answers every later query of the scope from this dict.
        done = self._built
        missing = [p for p in positions if p not in done]
        if missing:
            done.update(self._build(missing))
        return [done[p] for p in positions]

    def _build(self, positions: Sequence[int]) -> dict[int, Memory]:
        # Map positions back to segment rows; one Arrow take per segment.
        offsets = np.cumsum([0] + [len(p.local) if p.local is not None else p.end - p.start
                                   for p in self.parts])
        by_part: dict[int, list[tuple[int, int]]] = {}
        for pos in positions:
            j = int(np.searchsorted(offsets, pos, side="right") - 1)
            p = self.parts[j]
            off = pos - offsets[j]
            row = p.start + (int(p.local[off]) if p.local is not None else int(off))
            by_part.setdefault(j, []).append((pos, row))
        found: dict[int, Memory] = {}
        for j, items in by_part.items():
            seg = self.parts[j].seg
            mems = rows_to_memories(seg.table, [r for _, r in items], seg.vectors)
            found.update((pos, m) for (pos, _), m in zip(items, mems, strict=True))
        return found

    # -- building --------------------------------------------------------------
    @classmethod
    def from_spans(cls, snap: StoreSnapshot,
                   spans: Iterable[tuple[LoadedSegment, tuple[int, int]]]) -> Candidates:
        """Every row of the spans that no tombstone of ``snap`` hides."""
        parts: list[_Part] = []
        tables: list[pa.Table] = []
        for seg, (start, end) in spans:
            dead = snap.forgotten(seg)
            local = None if dead is None or not dead[start:end].any() \
                else np.flatnonzero(~dead[start:end])
            if local is not None and not len(local):
                continue
            sliced = seg.table.select(_COLUMNS).slice(start, end - start)
            tables.append(sliced if local is None else sliced.take(local))
            parts.append(_Part(seg, start, end, local))
        table = pa.concat_tables(tables) if tables else _empty_table()
        return cls(table, parts=parts)

    @classmethod
    def from_memories(cls, memories: list[Memory], dense: np.ndarray | None) -> Candidates:
        table = pa.table({
            "memory_id": [m.memory_id for m in memories],
            "app_name": pa.array([m.app_name for m in memories], pa.string()),
            "agent_name": pa.array([m.agent_name for m in memories], pa.string()),
            "session_id": [m.session_id for m in memories],
            "kind": [m.kind for m in memories],
            "key_text": [m.key_text for m in memories],
            "entities": pa.array([list(m.entities) for m in memories], pa.list_(pa.string())),
            **{name: pa.array([getattr(m, name) for m in memories], pa.float64())
               for name in ("event_time_start", "event_time_end", "created_at", "expires_at")},
        })
        return cls(table, memories=memories, dense=dense)


def _empty_table() -> pa.Table:
    return pa.table({"memory_id": pa.array([], pa.string()),
                     "app_name": pa.array([], pa.string()),
                     "agent_name": pa.array([], pa.string()),
                     "session_id": pa.array([], pa.string()),
                     "kind": pa.array([], pa.string()),
                     "key_text": pa.array([], pa.string()),
                     "entities": pa.array([], pa.list_(pa.string())),
                     **{n: pa.array([], pa.float64()) for n in
                        ("event_time_start", "event_time_end", "created_at", "expires_at")}})


def rank_candidates(cands: Candidates, query: str, query_vec: np.ndarray | None, top_k: int,
                    filters: RecallFilters, config: RetrievalConfig, mode: str,
                    now: float | None = None, extra_mask: np.ndarray | None = None,
                    one_user: bool = True) -> list[RecallResult]:
    """Top-k of one candidate set for a query (the whole ranking step). The query's time
    intent (read against ``filters.reference_time``, else ``now``) adds the time axis and
    sets how much recency counts (:mod:`mnemoray.memory.axes`). ``one_user``: the set is
    one user's, so a record repeating a better one's words is left out (app-wide, two
    users' equal words are two memories)."""
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
    if "entity" in weights:
        signals["entity"] = cands.entity_index(config.tokenizer).scores(query).astype(
            np.float64)
    depth = max(config.depth, top_k)
    if "time" in weights or "recency" in weights:
        qt = query_time(query, filters.reference_time if filters.reference_time is not None
                        else now)
        if "recency" in weights:  # off (absent) for the past or a named period
            factor = qt.recency_factor()
            weights = {k: v * (factor if k == "recency" else 1.0) for k, v in weights.items()
                       if k != "recency" or factor > 0}
        if "time" in weights and qt.active:
            # Only the records the query looks at: those a relevance signal ranks, and
            # those of a period it names.
            looked = np.zeros(cands.size, dtype=bool)
            for name, values in signals.items():
                looked |= rank_desc(values, eligible, depth, positive_only=name != "dense") > 0
            looked[period_positions(qt, cands.t_start, cands.t_end, eligible)] = True
            signals["time"] = time_signal(qt, np.flatnonzero(looked), cands.time_facts,
                                          cands.t_start, cands.t_end, cands.size)
    score, ranks, fresh = fuse(signals, eligible, weights, cands.t_end, depth,
                               config.recency_window, config.recency_half_life_s,
                               config.bm25_saturation)
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
            if name not in signals:  # time, for a query without a time intent
                continue
            sig[name] = round(float(signals[name][pos]), 6)
            if ranks[name][pos]:
                sig[f"{name}_rank"] = int(ranks[name][pos])
        results.append(RecallResult(memory, float(score[pos]), sig, found_by(sig)))
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
                               extra_mask=view)

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


def _check_query(query: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise RetrievalError("must be a non-empty string", field="query")


def _check_ids(app: str, user: str) -> None:
    for name, value in (("app_name", app), ("user_id", user)):
        if not isinstance(value, str) or not value:
            raise RetrievalError("must be a non-empty string", field=name)

