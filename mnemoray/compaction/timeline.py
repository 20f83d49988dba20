"""The session as the compactor sees it: invocations, safe cuts, what is covered.

A window never separates a tool call from its result, and never contains
anything still waiting (a tool call without a result, a confirmation request
without an answer): those must reach the model raw. ``safe_after[i]`` says
whether a window may end at event ``i``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.tokens import count_tokens

CONFIRMATION_REQUEST = "request_confirmation"


def is_summarizable(event: Event) -> bool:
    """Compaction events, streaming fragments and control signals are never content."""
    return not event.partial and event.type not in ("compaction", "control")


def event_tokens(event: Event) -> int:
    """What the event costs in a prompt: its text plus any tool payload."""
    payload = json.dumps(event.data, sort_keys=True, default=str) if event.data else ""
    return count_tokens(event.text) + (count_tokens(payload) if payload else 0)


@dataclass(frozen=True)
class Timeline:
    """The session seen by the compactor.

    ``events`` are the non-partial, non-compaction events in order (control
    events included: they belong to invocations and hold confirmations).
    """

    events: list[Event]
    invocations: list[tuple[int, int]]  # inclusive index ranges holding content
    safe_after: list[bool]  # a window may end at index i
    covered_end: int  # last index summarized by an earlier compaction, -1 if none
    compactions: list[Event]

    @classmethod
    def of(cls, session: Session) -> Timeline:
        events = [e for e in session.events if not e.partial and e.type != "compaction"]
        compactions = [e for e in session.events if e.type == "compaction"]
        return cls(
            events,
            _invocations(events),
            _safe_cuts(events),
            _covered_end(events, compactions),
            compactions,
        )

    def last_safe_at_or_before(self, index: int, floor: int) -> int:
        while index >= floor and not self.safe_after[index]:
            index -= 1
        return index

    def first_safe_at_or_after(self, index: int) -> int | None:
        for i in range(index, len(self.events)):
            if self.safe_after[i]:
                return i
        return None

    def safe_start(self, index: int) -> int:
        """Move a window start back until no call/confirmation pair straddles it."""
        while index > 0 and not self.safe_after[index - 1]:
            index -= 1
        return index

    def live_compactions(self) -> list[Event]:
        """The compactions a compile shows: those not inside a later one (a roll-up)."""
        sets = [frozenset(c.data.get("source_event_ids") or ()) for c in self.compactions]
        holders: dict[str, list[int]] = {}  # event id -> the compactions covering it
        for k, ids in enumerate(sets):
            for i in ids:
                holders.setdefault(i, []).append(k)

        def superseded(k: int) -> bool:  # a later one holds all of it
            probe = next(iter(sets[k]), None)
            return probe is not None and any(j > k and sets[k] <= sets[j] for j in holders[probe])

        return [c for k, c in enumerate(self.compactions) if not superseded(k)]

    def summary_tokens(self) -> int:
        """Tokens of the summaries a compile shows."""
        return sum(count_tokens(c.text) for c in self.live_compactions())

    def covered(self) -> list[bool]:
        """``covered[i]``: an earlier compaction summarized ``events[i]`` (by its id, or by
        time range for one written without ids)."""
        ids: set[str] = set()
        until = float("-inf")
        for c in self.compactions:
            sources = c.data.get("source_event_ids")
            if sources:
                ids.update(sources)
            else:
                until = max(until, c.data.get("end_ts", float("-inf")))
        return [e.id in ids or e.timestamp <= until for e in self.events]


def _invocations(events: Sequence[Event]) -> list[tuple[int, int]]:
    """Consecutive runs of one invocation id; without ids a user message opens one."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(events) + 1):
        if i < len(events):
            prev, cur = events[i - 1], events[i]
            opens = cur.invocation_id != prev.invocation_id or (
                not cur.invocation_id and cur.role == "user" and cur.type == "message"
            )
            if not opens:
                continue
        if any(is_summarizable(e) for e in events[start:i]):
            groups.append((start, i - 1))
        start = i
    return groups


def _safe_cuts(events: Sequence[Event]) -> list[bool]:
    """``safe[i]``: no tool call or confirmation request at <= i is answered after i.

    An unanswered one is open forever, so nothing after it is ever safe: a
    pending call or confirmation can never fall inside a window.
    """
    n = len(events)
    calls: dict[str, int] = {}
    spans: list[tuple[int, int]] = []  # [first, last] indices a cut may not follow
    open_calls: dict[str, int] = {}
    open_requests: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.type == "tool_call" and e.call_id:
            calls.setdefault(e.call_id, i)
            open_calls.setdefault(e.call_id, i)
        elif e.type == "tool_result" and e.call_id in open_calls:
            spans.append((open_calls.pop(e.call_id), i - 1))
        elif e.type == "control":
            call_id: Any = e.data.get("call_id")  # what the client sent
            if e.data.get("action") == CONFIRMATION_REQUEST:
                # The call awaiting confirmation stays with its request.
                open_requests.setdefault(call_id, min(i, calls.get(call_id, i)))
            elif call_id in open_requests:
                spans.append((open_requests.pop(call_id), i - 1))
    spans.extend((start, n - 1) for start in (*open_calls.values(), *open_requests.values()))
    depth = [0] * (n + 1)
    for first, last in spans:
        if first <= last:
            depth[first] += 1
            depth[last + 1] -= 1
    safe: list[bool] = []
    running = 0
    for i in range(n):
        running += depth[i]
        safe.append(running == 0)
    return safe


def _covered_end(events: Sequence[Event], compactions: Sequence[Event]) -> int:
    position = {e.id: i for i, e in enumerate(events)}
    end = -1
    for c in compactions:
        ids = c.data.get("source_event_ids")
        if ids:
            end = max([end, *(position[i] for i in ids if i in position)])
        else:  # a compaction written elsewhere: trust its time range
            end_ts = c.data.get("end_ts", float("-inf"))
            end = max([end, *(i for i, e in enumerate(events) if e.timestamp <= end_ts)])
    return end
