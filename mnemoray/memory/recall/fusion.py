"""Fusion: pure functions over a candidate set's signal arrays (ranks, freshness, the
weighted sum, the top positions); no I/O, no state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from mnemoray.memory.recall.axes import FOUND

BM25_SATURATION = 3.0  # bm25 / (bm25 + c): why this c, see retrieval.DEFAULT_WEIGHTS


# -- pure functions over candidate arrays ------------------------------------
def rank_desc(
    values: np.ndarray, eligible: np.ndarray, depth: int, positive_only: bool = False
) -> np.ndarray:
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


def freshness(
    times: np.ndarray,
    dense: np.ndarray,
    eligible: np.ndarray,
    window: float,
    half_life: float = 86_400.0,
) -> np.ndarray:
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


def signal_ranks(name: str, values: np.ndarray, eligible: np.ndarray, depth: int) -> np.ndarray:
    """How :func:`fuse` ranks signal ``name``: time only where it matched in full
    (:data:`~mnemoray.memory.recall.axes.FOUND`), every signal but dense only where positive."""
    if name == "time":
        values = np.where(values >= FOUND, values, 0.0)
    return rank_desc(values, eligible, depth, positive_only=name != "dense")


class Fusion(NamedTuple):
    """What :func:`fuse` computes for aligned candidate arrays."""

    score: np.ndarray  # 1 + sum of the contributions for voted records (see offset), else 0
    ranks: dict[str, np.ndarray]  # per ranking signal, 1-based (0: not ranked)
    fresh: np.ndarray | None  # recency in [0, 1) (None: recency off)
    contributions: dict[str, np.ndarray]  # what each signal added to the score


#: Signals that never find a record (no rank of their own): they re-order what others found.
UNRANKED = frozenset({"recency", "speaker"})

#: The contribution that keeps voted scores > 0 where a stale fact's graph value takes a
#: total below -1 (see :func:`fuse`); absent otherwise.
OFFSET = "offset"


def fuse(
    signals: Mapping[str, np.ndarray],
    eligible: np.ndarray,
    weights: Mapping[str, float],
    times: np.ndarray,
    depth: int = 100,
    recency_window: float = 0.05,
    recency_half_life: float = 86_400.0,
    bm25_saturation: float = BM25_SATURATION,
    known_ranks: Mapping[str, np.ndarray] | None = None,
) -> Fusion:
    """Fused scores, per-signal ranks, freshness and contributions for aligned arrays.

    ``signals`` holds the raw relevance arrays (dense, bm25, entity, graph where the user
    has a graph, and time for a query with a time intent) for the active signals;
    recency (if weighted) is derived from ``times`` and dense. The time axis ranks
    (finds) only the records it matched in full (a named period,
    :data:`mnemoray.memory.recall.axes.FOUND`); below that it only adds its weighted value.
    The graph signal ranks its positive values and adds all of them (a negative one:
    the record states a fact that no longer holds, :mod:`mnemoray.graph.recall`).
    Candidates no signal ranked score 0; the others > 0.

    The score is built as the sum of the per-signal contributions (one array each), so
    an explanation of a score (``explain`` on recall) is that sum and cannot disagree.

    ``known_ranks``: ranks the caller already took with :func:`signal_ranks` over the
    same signals, ``eligible`` and ``depth`` (each ``rank_desc`` is a partition of the
    whole set: the ranking step would otherwise take them twice).
    """
    ranks: dict[str, np.ndarray] = {}
    known = known_ranks or {}
    for name, values in signals.items():
        if name in weights and name not in UNRANKED:
            found = known.get(name)
            ranks[name] = (
                found if found is not None else signal_ranks(name, values, eligible, depth)
            )
    n = len(times)
    voted = np.zeros(n, dtype=bool)
    for r in ranks.values():
        voted |= r > 0
    parts: dict[str, np.ndarray] = {}
    if "dense" in ranks:
        dense = signals["dense"]
        parts["dense"] = weights["dense"] * np.where(np.isfinite(dense), dense, 0.0)
    if "bm25" in ranks:
        bm25 = signals["bm25"]
        parts["bm25"] = weights["bm25"] * bm25 / (bm25 + bm25_saturation)
    if "entity" in ranks:
        entity = signals["entity"]
        parts["entity"] = weights["entity"] * entity / (entity + 1.0)
    if "graph" in signals and "graph" in weights:  # in [-1, 1]: a stale fact's record loses
        parts["graph"] = weights["graph"] * signals["graph"]
    if "time" in ranks:
        parts["time"] = weights["time"] * signals["time"]
    if "speaker" in signals and "speaker" in weights:  # re-orders what others found
        parts["speaker"] = weights["speaker"] * signals["speaker"]
    fresh = None
    if "recency" in weights and "dense" in signals:
        fresh = freshness(times, signals["dense"], eligible, recency_window, recency_half_life)
        parts["recency"] = weights["recency"] * fresh
    total = np.zeros(n, dtype=np.float64)
    for values in parts.values():
        total += values
    # Cosines reach -1: a constant shift keeps every voted record's score > 0 (unvoted
    # ones are 0) without changing the order. score = 1 + fused relevance, the same
    # scale with or without a graph (a store without one scores alike); only where a
    # stale record's graph value takes a voted total below -1 does the shift grow (the
    # growth is the ``offset`` contribution).
    shift = max(1.0, -float(total[voted].min())) if voted.any() else 1.0
    if shift > 1.0:
        parts[OFFSET] = np.full(n, shift - 1.0)
    score = np.where(voted, total + shift + 1e-9, 0.0)
    return Fusion(score, ranks, fresh, parts)


def reported_contributions(parts: Mapping[str, float], score: float) -> dict[str, float]:
    """``parts`` (a record's fusion terms) as reported, to 6 decimals like its score, so that
    the reported score is exactly ``1 + sum`` of them (to float precision): each term
    rounded on its own would drift from the rounded score by up to half a unit per term.
    The remainder (that drift and fusion's 1e-9) goes to ``offset``, which is then listed
    where it is not 0 (or where the fusion had one)."""
    out = {name: round(value, 6) for name, value in parts.items() if name != OFFSET}
    rest = round(round(score, 6) - 1.0 - sum(out.values()), 6) + 0.0  # + 0.0: no -0.0
    if rest or OFFSET in parts:
        out[OFFSET] = rest
    return out


def top_positions(
    score: np.ndarray, times: np.ndarray, tiebreak: Sequence[str], top_k: int
) -> list[int]:
    """Positions of the best ``top_k`` scores > 0; ties go to the newer record, then the id."""
    cand = np.flatnonzero(score > 0)
    if len(cand) > top_k * 4 + 16:
        cand = cand[np.argpartition(-score[cand], top_k - 1)[:top_k]]
        # Keep every candidate tied with the k-th so the tie-break is exact.
        cutoff = score[cand].min()
        cand = np.flatnonzero(score >= cutoff)
    return sorted(cand.tolist(), key=lambda i: (-score[i], -times[i], tiebreak[i]))[:top_k]
