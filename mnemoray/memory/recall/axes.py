"""The time axis of recall, and which axes found a recalled memory.

A question's time intent (:func:`mnemoray.temporal.time_intent`, resolved against
the query's reference time) becomes one signal per candidate record, in [0, 1]:

- the question names a period ("last May", "in 2022"): 1 for a record whose event
  time, or a time its own words name (resolved against the record's date), overlaps
  that period; such records are *found* by the time axis even when no word matches;
- the question asks "when": a record that carries its answer, a time expression in
  its words ("yesterday", "in March") scores :data:`WHEN_BODY`, one that only carries
  the date it was said (a chunk line's ``[date]`` prefix) :data:`WHEN_DATED`; records
  without either (a fact, a summary) score 0. This re-orders, it never finds;
- the question asks about the past ("before", "used to") or names a period: recency
  is switched off for it (the newest statement is not the better answer then);
- the question asks about now ("now", "these days", "currently"): recency counts
  :data:`PRESENT_BOOST` times its weight (then the newest statement of a changed fact
  is the answer).

A record whose event time overlaps a named period is found from the set's arrays; the
times a record's words name (:class:`TimeFacts`) are resolved once per record and kept
(:mod:`mnemoray.memory.recall.record_times`, :meth:`Candidates.time_facts`), so a recall reads
no words of records already read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnemoray.errors import InvalidInput
from mnemoray.memory.records.windows import EXPANSION
from mnemoray.temporal import TimeIntent, resolve_times, time_intent

# Signals whose ranks say which axes found a record, in the order results list them.
AXES: tuple[str, ...] = ("dense", "bm25", "entity", "graph", "time")
# A period match finds a record (1.0); a "when" answer only raises one (below 1).
FOUND = 1.0
# A question that names one day ("on January 11") says most about when: a record of that
# day is stronger evidence than one of a named month or year, so the axis counts more
# (at the base weight, other days' talks matching the question's generic words a
# little better stayed above it).
DAY_BOOST = 2.5
DAY_S = 86_400.0
WHEN_BODY = 0.6
WHEN_DATED = 0.3
PRESENT_BOOST = 3.0
_PRESENT = re.compile(
    r"\b(?:now|these\s+days|nowadays|currently|at\s+the\s+moment|"
    r"at\s+present|still|anymore|today)\b",
    re.IGNORECASE,
)
# A chunk line's "[2023-05-07] " prefix (mnemoray.memory.records.windows.render_line): not
# what was said (nor is windows.EXPANSION, the lines its key adds).
_LINE_DATE = re.compile(r"^\[\d{4}-\d\d-\d\d\] ?", re.MULTILINE)


@dataclass(frozen=True)
class TimeFacts:
    """What one record says of time: whether its lines carry the date they were said,
    and the spans ``(start, end)`` its own words name (resolved against its date)."""

    dated: bool
    spans: tuple[tuple[float, float], ...]


_TIMELESS = {False: TimeFacts(False, ()), True: TimeFacts(True, ())}


def time_facts(key_text: str, reference: float) -> TimeFacts:
    text = EXPANSION.sub("", key_text or "")
    dated = bool(_LINE_DATE.search(text))
    body = _LINE_DATE.sub("", text)
    try:
        spans = tuple((float(s.start), float(s.end)) for s in resolve_times(body, reference))
    except (InvalidInput, ValueError, OverflowError):  # a date out of range names no time
        spans = ()
    # Kept per record for every record looked at: the timeless ones share two objects.
    return TimeFacts(dated, spans) if spans else _TIMELESS[dated]


@dataclass(frozen=True)
class QueryTime:
    """A query's time intent as recall uses it; ``present``: it asks how things are now."""

    query: str
    intent: TimeIntent
    present: bool

    @property
    def periods(self) -> tuple[tuple[float, float], ...]:
        return tuple((float(s.start), float(s.end)) for s in self.intent.spans)

    @property
    def active(self) -> bool:
        """Whether the time axis scores anything for this query."""
        return bool(self.intent.spans) or self.intent.asks_when

    def time_factor(self) -> float:
        """How much the time axis counts for this query (1: as configured): a question
        that names single days only, :data:`DAY_BOOST` times."""
        periods = self.periods
        if periods and all(b - a <= DAY_S for a, b in periods):
            return DAY_BOOST
        return 1.0

    def recency_factor(self) -> float:
        """How much recency counts for this query (1: as configured)."""
        if self.intent.about_past or self.intent.spans:
            return 0.0
        return PRESENT_BOOST if self.present else 1.0

    def cues(self) -> list[str]:
        out = list(self.intent.cues) + [s.text for s in self.intent.spans]
        if self.present:
            out.extend(m.group(0).lower() for m in _PRESENT.finditer(self.query))
        return list(dict.fromkeys(out))


def query_time(query: str, reference: Any) -> QueryTime:
    """The time intent of ``query`` (relative periods resolved against ``reference``)."""
    intent = time_intent(query, reference)
    present = bool(_PRESENT.search(query)) and not intent.about_past
    return QueryTime(query, intent, present)


def time_signal(
    qt: QueryTime,
    positions: Sequence[int] | np.ndarray,
    facts: Callable[[int], TimeFacts],
    t_start: np.ndarray,
    t_end: np.ndarray,
    size: int,
) -> np.ndarray:
    """The time axis over a candidate set: values at ``positions`` (the records the
    query looks at), 0 elsewhere."""
    out = np.zeros(size, dtype=np.float64)
    if not qt.active:
        return out
    todo = np.asarray(positions, dtype=np.intp).reshape(-1)
    periods = qt.periods
    if periods and len(todo):
        # A record whose event time overlaps a named period is found by that alone, over
        # the arrays at once: only the others' words are read (resolving words is what
        # costs, per record).
        hit = event_overlaps(periods, t_start[todo], t_end[todo])
        out[todo[hit]] = FOUND
        todo = todo[~hit]
    when = qt.intent.asks_when
    for pos in todo.tolist():
        tf = facts(pos)
        spans = tf.spans
        # Most records' words name no time: no overlap test (a generator) for them.
        if spans and periods and any(a < sb and sa < b for a, b in periods for sa, sb in spans):
            out[pos] = FOUND
        elif when:
            out[pos] = WHEN_BODY if spans else WHEN_DATED if tf.dated else 0.0
    return out


def event_overlaps(
    periods: Sequence[tuple[float, float]], t_start: np.ndarray, t_end: np.ndarray
) -> np.ndarray:
    """Which records' event times ``[t_start, t_end]`` overlap one of ``periods``
    (``[a, b)``; an event ending exactly where a period starts counts)."""
    hit = np.zeros(len(t_end), dtype=bool)
    for a, b in periods:
        hit |= (t_end >= a) & (t_start < b)
    return hit


def period_positions(
    qt: QueryTime, t_start: np.ndarray, t_end: np.ndarray, eligible: np.ndarray
) -> np.ndarray:
    """Records whose event time overlaps a period the query names (found by time alone)."""
    return np.flatnonzero(event_overlaps(qt.periods, t_start, t_end) & eligible)


def found_by(signals: dict[str, Any]) -> tuple[str, ...]:
    """The axes that found or raised a record: those that ranked it (``<axis>_rank``),
    and time when it scored the record at all (a "when" answer it raised)."""
    return tuple(
        a for a in AXES if f"{a}_rank" in signals or (a == "time" and signals.get("time", 0) > 0)
    )
