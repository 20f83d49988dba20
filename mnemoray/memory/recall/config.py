"""How recall ranks: the signals of each mode, their default weights (and why those
values), ``RetrievalConfig``; and the checks of a recall's arguments (mode, query, ids).
The ranking itself is :mod:`mnemoray.memory.recall.retriever`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from mnemoray.memory.recall.fusion import BM25_SATURATION
from mnemoray.memory.recall.keywords import AUTO, KeywordTokenizer
from mnemoray.memory.recall.modes import MODES, Mode  # defined there: the CLI imports it cheaply
from mnemoray.memory.records.filters import RetrievalError

SPEAKER_WEIGHT = 0.3
SIGNALS: tuple[str, ...] = ("dense", "bm25", "entity", "graph", "time", "recency", "speaker")
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
# - time 0.1 (mnemoray.memory.recall.axes): only for a question with a time intent; a record of
#   the period it names gains 0.1 (a named day: DAY_BOOST times that), a "when" answer
#   that states a time a little less.
# - speaker (mnemoray.memory.recall.speakers): only for a question about the user's own
#   words ("do I", "my") or the assistant's ("you said"); a record gains the weight times
#   the share of its words that side said. It re-orders, it never finds.
DEFAULT_WEIGHTS: dict[str, float] = {
    "dense": 1.0,
    "bm25": 0.15,
    "entity": 0.05,
    "graph": 0.25,
    "time": 0.1,
    "recency": 0.03,
    "speaker": SPEAKER_WEIGHT,
}


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
                raise RetrievalError(
                    f"unknown signal {name!r}; known: {', '.join(SIGNALS)}", field="weights"
                )
            if (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                raise RetrievalError(
                    f"must be a finite number >= 0, got {value!r}", field=f"weights.{name}"
                )
            weights[name] = float(value)
        object.__setattr__(self, "weights", weights)
        if not (
            isinstance(self.bm25_saturation, (int, float))
            and math.isfinite(self.bm25_saturation)
            and self.bm25_saturation > 0
        ):
            raise RetrievalError(
                f"must be a positive number, got {self.bm25_saturation!r}", field="bm25_saturation"
            )
        for name in ("depth", "app_candidates", "cache_scopes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise RetrievalError(f"must be a positive integer, got {value!r}", field=name)
        if not isinstance(self.recency_window, (int, float)) or self.recency_window < 0:
            raise RetrievalError(
                f"must be >= 0, got {self.recency_window!r}", field="recency_window"
            )
        if (
            not isinstance(self.recency_half_life_s, (int, float))
            or not self.recency_half_life_s > 0
        ):
            raise RetrievalError(
                f"must be > 0, got {self.recency_half_life_s!r}", field="recency_half_life_s"
            )

    @property
    def tokenizer(self) -> KeywordTokenizer:
        """The keyword index's tokenizer (``keyword_language``: ``auto`` or a Snowball
        language; :mod:`mnemoray.memory.recall.keywords`)."""
        return self._tokenizer  # type: ignore[attr-defined]  # set by __post_init__, not a field

    def active(self, mode: str | None = None) -> dict[str, float]:
        """Signal -> weight for a mode (weight 0 turns a signal off)."""
        return {
            s: self.weights[s]
            # A request's mode is checked once, when it is resolved (recall/request.py).
            for s in MODE_SIGNALS[mode or self.mode]
            if self.weights[s] > 0
        }


def check_mode(mode: str) -> Mode:
    if mode not in MODES:
        raise RetrievalError(f"{mode!r} is not one of {', '.join(MODES)}", field="mode")
    return cast(Mode, mode)


def check_query(query: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise RetrievalError("must be a non-empty string", field="query")


def check_ids(app: str, user: str) -> None:
    for name, value in (("app_name", app), ("user_id", user)):
        if not isinstance(value, str) or not value:
            raise RetrievalError("must be a non-empty string", field=name)
