"""Which session events reach the model, and in what order.

Selection is separate from rendering: it decides *what* goes in (dropping
framework noise, applying compactions, cutting to the current turn) and
returns events; ``casting`` decides how each one looks.

A tool call and its result(s) form a *tool unit* (grouped by ``call_id``,
see :func:`tool_units`). A unit is atomic: if any of its events is shown raw,
all of them are, so a call is never separated from its result by a
compaction boundary or a turn cut.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from mnemoray.events import Event

NOISE_TYPES = frozenset({"control", "error"})


@dataclass
class History:
    """The session's events sorted into what the selection works on."""

    raw: list[Event] = field(default_factory=list)  # visible, non-compaction, in log order
    compactions: list[Event] = field(default_factory=list)
    call_owner: dict[str, str] = field(default_factory=dict)  # call_id -> who called
    result_calls: set[str] = field(default_factory=set)  # call ids with a result in raw
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count


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
        history = History(list(before.raw), list(before.compactions), dict(before.call_owner),
                          set(before.result_calls))
        partial, noise, empty = (before.skipped[k]
                                 for k in ("partial", "control_or_error", "empty"))
    raw, compactions, call_owner = history.raw, history.compactions, history.call_owner
    result_calls = history.result_calls
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
    return history


def tool_units(raw: Sequence[Event]) -> list[list[int]]:
    """Positions in ``raw`` of each finished tool call with its result(s)."""
    by_call: dict[str, list[int]] = {}
    for i, event in enumerate(raw):
        if event.type != "message":
            by_call.setdefault(event.data["call_id"], []).append(i)
    return [unit for unit in by_call.values() if len(unit) > 1]


def close_tool_units(raw: Sequence[Event], shown: set[int]) -> None:
    """Show every event of a tool unit of which any event is shown."""
    for unit in tool_units(raw):
        if not shown.issuperset(unit) and not shown.isdisjoint(unit):
            shown.update(unit)


def select(events: Sequence[Event], include_contents: str = "default",
           history: History | None = None) -> Selection:
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
    close_tool_units(raw, shown)
    skipped = {**history.skipped, "before_current_turn": len(raw) - len(shown)}
    return Selection([raw[i] for i in sorted(shown)], history.call_owner, [], 0, skipped)


def _with_compactions(history: History) -> Selection:
    raw = history.raw
    if not history.compactions:
        return Selection(raw, history.call_owner, [], 0, history.skipped)
    index_of = {e.id: i for i, e in enumerate(raw)}
    kept, sources = _kept_compactions(history.compactions, raw)
    covered_ids = frozenset().union(*sources)
    shown = {i for i, e in enumerate(raw) if e.id not in covered_ids}
    close_tool_units(raw, shown)

    # A summary sits where the first event it replaces was; a summary whose
    # events are no longer in the log sits by its start time.
    timestamps: list[float] | None = None
    placed: list[tuple[int, float, int, Event]] = []
    for order, (event, ids) in enumerate(zip(kept, sources, strict=True)):
        present = [index_of[s] for s in ids if s in index_of]
        if present:
            at = min(present)
        else:
            timestamps = timestamps or [e.timestamp for e in raw]
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
    skipped = {**history.skipped,
               "superseded_compactions": len(history.compactions) - len(kept)}
    return Selection(out, history.call_owner, [e.id for e in kept],
                     len(raw) - len(shown), skipped)


def _kept_compactions(compactions: list[Event],
                      raw: list[Event]) -> tuple[list[Event], list[frozenset[str]]]:
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
            subsumed.update(c for c in by_probe[probe]
                            if c < d and sources[c] <= ids)
    kept = [c for c in range(len(compactions)) if c not in subsumed]
    return [compactions[c] for c in kept], [sources[c] for c in kept]
