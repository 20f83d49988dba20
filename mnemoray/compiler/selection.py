"""Which session events reach the model, and in what order.

Selection is separate from rendering: it decides *what* goes in (dropping
framework noise, applying compactions, cutting to the current turn) and
returns events; ``casting`` decides how each one looks.

A tool call and its result(s) form a *tool unit* (grouped by ``call_id``,
see :func:`call_units`). A unit is atomic: if any of its events is shown raw,
all of them are, so a call is never separated from its result by a
compaction boundary or a turn cut.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import attrgetter, ne, not_

from mnemoray.sessions.events import Event

NOISE_TYPES = frozenset({"control", "error"})
_id = attrgetter("id")
_type = attrgetter("type")
_timestamp = attrgetter("timestamp")


@dataclass
class History:
    """The session's events sorted into what the selection works on."""

    raw: list[Event] = field(default_factory=list)  # visible, non-compaction, in log order
    compactions: list[Event] = field(default_factory=list)
    call_owner: dict[str, str] = field(default_factory=dict)  # call_id -> who called
    result_calls: set[str] = field(default_factory=set)  # call ids with a result in raw
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    # call_id -> positions in raw of its tool events: built on first use (only a
    # compacted or turn-cut selection needs it), extended as the log grows.
    units: dict[str, tuple[int, ...]] | None = None


@dataclass
class Selection:
    """Events to render, in order (raw events and compaction events)."""

    events: list[Event]
    call_owner: dict[str, str]
    compactions_used: list[str]
    covered: int  # raw events replaced by a summary
    skipped: dict[str, int]


def sort_history(events: Sequence[Event], before: History | None = None) -> History:
    """One pass: drop partial events, framework noise and empty messages.
    ``before``: the history of the events logged before ``events`` (left unchanged),
    so a grown session is sorted by its new events only."""
    if before is None:
        history = History()
        partial = noise = empty = 0
    else:
        history = History(
            list(before.raw),
            list(before.compactions),
            dict(before.call_owner),
            set(before.result_calls),
        )
        partial, noise, empty = (
            before.skipped[k] for k in ("partial", "control_or_error", "empty")
        )
    raw, compactions, call_owner = history.raw, history.compactions, history.call_owner
    result_calls = history.result_calls
    start = len(raw)
    for event in events:
        kind = event.type
        if event.partial:
            partial += 1
        elif kind == "message":
            if event.text:
                raw.append(event)
            else:
                empty += 1
        elif kind == "tool_call":
            call_owner[event.data["call_id"]] = event.author
            raw.append(event)
        elif kind == "tool_result":
            result_calls.add(event.data["call_id"])
            raw.append(event)
        elif kind == "compaction":
            compactions.append(event)
        else:
            noise += 1
    history.skipped = {"partial": partial, "control_or_error": noise, "empty": empty}
    if before is not None and before.units is not None:
        history.units = _add_units(dict(before.units), raw, start)
    return history


def call_units(history: History) -> dict[str, tuple[int, ...]]:
    """call_id -> positions in ``history.raw`` of its tool events."""
    if history.units is None:
        history.units = _add_units({}, history.raw, 0)
    return history.units


def _add_units(
    units: dict[str, tuple[int, ...]], raw: list[Event], start: int
) -> dict[str, tuple[int, ...]]:
    # The tool events' positions found C-level: most events are messages.
    for i in compress(
        range(start, len(raw)), map(ne, map(_type, islice(raw, start, None)), repeat("message"))
    ):
        call_id = raw[i].data["call_id"]
        units[call_id] = units.get(call_id, ()) + (i,)
    return units


def close_tool_units(history: History, shown: set[int]) -> None:
    """Show every event of a tool unit (a call with its result(s)) of which any
    event is shown. Walks the smaller of the shown and hidden sides: a unit is
    split only if it has an event on each."""
    raw, units = history.raw, call_units(history)
    hidden_side = len(shown) * 2 > len(raw)
    side = set(range(len(raw))) - shown if hidden_side else list(shown)
    for i in side:
        event = raw[i]
        if event.type == "message":
            continue
        unit = units[event.data["call_id"]]
        if len(unit) > 1 and (
            not shown.isdisjoint(unit) if hidden_side else not shown.issuperset(unit)
        ):
            shown.update(unit)


def select(
    events: Sequence[Event], include_contents: str = "default", history: History | None = None
) -> Selection:
    """``history``: ``sort_history(events)`` when the caller already has it."""
    if history is None:
        history = sort_history(events)
    if include_contents == "none":
        return _current_turn(history)
    return _with_compactions(history)


def _current_turn(history: History) -> Selection:
    """From the last user message on (compactions do not apply inside a turn)."""
    raw = history.raw
    start = len(raw)
    for i in range(len(raw) - 1, -1, -1):
        if raw[i].role == "user" and raw[i].type == "message":
            start = i
            break
    shown = set(range(start, len(raw)))
    close_tool_units(history, shown)
    skipped = {**history.skipped, "before_current_turn": len(raw) - len(shown)}
    return Selection([raw[i] for i in sorted(shown)], history.call_owner, [], 0, skipped)


def _with_compactions(history: History) -> Selection:
    raw = history.raw
    if not history.compactions:
        return Selection(raw, history.call_owner, [], 0, history.skipped)
    # C-level passes over the raw events (this runs on every compile of a
    # compacted session): ids to positions (the last one for a repeated id), and
    # the positions whose event no kept compaction covers.
    ids = list(map(_id, raw))
    index_of = dict(zip(ids, range(len(raw)), strict=True))
    kept, sources = _kept_compactions(history.compactions, raw)
    covered_ids = frozenset().union(*sources)
    shown = set(compress(range(len(raw)), map(not_, map(covered_ids.__contains__, ids))))
    close_tool_units(history, shown)

    # A summary sits where the first event it replaces was; a summary whose
    # events are no longer in the log sits by its start time.
    timestamps: list[float] | None = None
    placed: list[tuple[int, float, int, Event]] = []
    for order, (event, source) in enumerate(zip(kept, sources, strict=True)):
        present = {index_of[s] for s in source if s in index_of}
        if present:
            at = min(present)
        else:
            timestamps = timestamps or list(map(_timestamp, raw))
            at = bisect_left(timestamps, event.data["start_ts"])
        placed.append((at, float(event.data["start_ts"]), order, event))
    placed.sort(key=lambda p: p[:3])

    out: list[Event] = []
    next_summary = 0
    for i in sorted(shown):
        while next_summary < len(placed) and placed[next_summary][0] <= i:
            out.append(placed[next_summary][3])
            next_summary += 1
        out.append(raw[i])
    out.extend(p[3] for p in placed[next_summary:])
    skipped = {**history.skipped, "superseded_compactions": len(history.compactions) - len(kept)}
    return Selection(out, history.call_owner, [e.id for e in kept], len(raw) - len(shown), skipped)


def _kept_compactions(
    compactions: list[Event], raw: list[Event]
) -> tuple[list[Event], list[frozenset[str]]]:
    """Compactions not wholly inside a later one, with the event ids each covers.

    Coverage is by ``source_event_ids``; a compaction without them covers the
    raw events in its ``[start_ts, end_ts]`` window. Containment compares the
    id sets themselves, so it holds even when the sources left the log.
    """
    sources: list[frozenset[str]] = []
    for event in compactions:
        source_ids = event.data.get("source_event_ids")
        if not source_ids:
            lo, hi = event.data["start_ts"], event.data["end_ts"]
            source_ids = [e.id for e in raw if lo <= e.timestamp <= hi]
        sources.append(frozenset(source_ids))
    # A compaction can only be inside one that holds its first id: find those
    # with one C-level set intersection per compaction, not a pairwise scan.
    by_probe: dict[str, list[int]] = {}
    for c, ids in enumerate(sources):
        if ids:
            by_probe.setdefault(next(iter(ids)), []).append(c)
    probes = by_probe.keys()
    subsumed: set[int] = set()
    for d, ids in enumerate(sources):
        for probe in probes & ids:
            subsumed.update(c for c in by_probe[probe] if c < d and sources[c] <= ids)
    kept = [c for c in range(len(compactions)) if c not in subsumed]
    return [compactions[c] for c in kept], [sources[c] for c in kept]
