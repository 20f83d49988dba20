"""Session compaction: summarize older events into a ``compaction`` event.

Like ADK's context compaction, a sliding window over *invocations*: once
``interval`` invocations have completed since the last compaction, the new
ones plus the last ``overlap`` invocations before them are summarized. A
token threshold is a second trigger that compacts everything not yet covered
except the last ``keep_last`` events. Raw events always stay in the store;
the compaction event only adds a summary layer naming exactly the events it
summarized (``data["source_event_ids"]``).

A window never separates a tool call from its result, and never contains
anything still waiting (a tool call without a result, a confirmation request
without an answer): those must reach the model raw.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mnemoray.errors import InvalidInput
from mnemoray.events import Event
from mnemoray.session import Session
from mnemoray.session_store import SessionStore
from mnemoray.summarizers.base import Summarizer
from mnemoray.tokens import count_tokens

COMPACTOR_AUTHOR = "compactor"
CONFIRMATION_REQUEST = "request_confirmation"


@dataclass(frozen=True)
class CompactionConfig:
    interval: int | None = None  # compact every N new (completed) invocations
    overlap: int = 1  # invocations re-included from the previous window
    token_threshold: int | None = None  # compact when uncovered tokens exceed this
    keep_last: int = 6  # events kept raw under the token trigger

    def __post_init__(self) -> None:
        for name, minimum in (("interval", 1), ("overlap", 0), ("token_threshold", 1),
                              ("keep_last", 0)):
            value = getattr(self, name)
            if value is None and name in ("interval", "token_threshold"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                optional = " or None" if name in ("interval", "token_threshold") else ""
                raise InvalidInput(f"must be an int >= {minimum}{optional}, got {value!r}",
                                   field=f"CompactionConfig.{name}")


def is_summarizable(event: Event) -> bool:
    """Compaction events, streaming fragments and control signals are never content."""
    return not event.partial and event.type not in ("compaction", "control")


def event_tokens(event: Event) -> int:
    """What the event costs in a prompt: its text plus any tool payload."""
    payload = json.dumps(event.data, sort_keys=True, default=str) if event.data else ""
    return count_tokens(event.text) + (count_tokens(payload) if payload else 0)


@dataclass(frozen=True)
class _Timeline:
    """The session seen by the compactor.

    ``events`` are the non-partial, non-compaction events in order (control
    events included: they belong to invocations and hold confirmations).
    """

    events: list[Event]
    invocations: list[tuple[int, int]]  # inclusive index ranges holding content
    safe_after: list[bool]  # a window may end at index i
    covered_end: int  # last index summarized by an earlier compaction, -1 if none

    @classmethod
    def of(cls, session: Session) -> _Timeline:
        events = [e for e in session.events if not e.partial and e.type != "compaction"]
        return cls(events, _invocations(events), _safe_cuts(events),
                   _covered_end(events, [e for e in session.events if e.type == "compaction"]))

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


def _invocations(events: Sequence[Event]) -> list[tuple[int, int]]:
    """Consecutive runs of one invocation id; without ids a user message opens one."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(events) + 1):
        if i < len(events):
            prev, cur = events[i - 1], events[i]
            opens = cur.invocation_id != prev.invocation_id or (
                not cur.invocation_id and cur.role == "user" and cur.type == "message")
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
            call_id = e.data.get("call_id")
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


class Compactor:
    """Decides when and what to compact; the summarizer decides how."""

    def __init__(self, summarizer: Summarizer, config: CompactionConfig) -> None:
        if not callable(getattr(summarizer, "summarize", None)):
            raise TypeError(f"summarizer: expected a Summarizer, got {type(summarizer).__name__}")
        if not isinstance(config, CompactionConfig):
            raise TypeError(f"config: expected CompactionConfig, got {type(config).__name__}")
        self.summarizer = summarizer
        self.config = config

    def plan(self, session: Session) -> list[Event] | None:
        """The events the next compaction would summarize, or None; writes nothing."""
        timeline = _Timeline.of(session)
        return self._sliding_window(timeline) or self._token_window(timeline)

    def maybe_compact(self, store: SessionStore, session: Session) -> Event | None:
        """Append one compaction event if a trigger fires; return it (else None)."""
        window = self.plan(session)
        if window is None:
            return None
        summary = self.summarizer.summarize(window)
        latest = max((e.timestamp for e in session.events), default=0.0)
        event = Event(
            author=COMPACTOR_AUTHOR, role="system", type="compaction", text=summary.summary,
            # JSON round trip: the stored form is what every store reads back.
            data=json.loads(json.dumps({
                "start_ts": window[0].timestamp,
                "end_ts": window[-1].timestamp,
                "summary": summary.to_dict(),
                "source_event_ids": [e.id for e in window],
            })),
            # Never earlier than what it summarizes, even for back-dated sessions.
            timestamp=max(time.time(), latest),
        )
        return store.append_event(session, event)

    # -- triggers ------------------------------------------------------------
    def _sliding_window(self, t: _Timeline) -> list[Event] | None:
        interval = self.config.interval
        if interval is None:
            return None
        new = [k for k, (first, _) in enumerate(t.invocations)
               if first > t.covered_end and self._completed(t, k)]
        if len(new) < interval:
            return None
        first_group = max(0, new[0] - self.config.overlap)
        start = t.safe_start(min(t.invocations[first_group][0], t.covered_end + 1))
        target = t.invocations[new[-1]][1]
        # Extend to take in results that already exist; else shrink so the
        # unanswered call stays raw.
        end = t.first_safe_at_or_after(target)
        if end is None:
            end = t.last_safe_at_or_before(target, start)
        return self._window(t, start, end)

    def _token_window(self, t: _Timeline) -> list[Event] | None:
        threshold, keep = self.config.token_threshold, self.config.keep_last
        if threshold is None:
            return None
        uncovered = [i for i in range(t.covered_end + 1, len(t.events))
                     if is_summarizable(t.events[i])]
        if sum(event_tokens(t.events[i]) for i in uncovered) <= threshold \
                or len(uncovered) <= keep:
            return None
        target = uncovered[-keep] - 1 if keep else len(t.events) - 1
        start = t.safe_start(t.covered_end + 1)
        # keep_last is a floor: a straddling call/result pair stays raw, whole.
        return self._window(t, start, t.last_safe_at_or_before(target, start))

    @staticmethod
    def _completed(t: _Timeline, k: int) -> bool:
        """Earlier invocations are done; the last one once the model has answered."""
        if k < len(t.invocations) - 1:
            return True
        first, last = t.invocations[k]
        final = [e for e in t.events[first:last + 1] if is_summarizable(e)][-1]
        answered = (final.role == "model" and final.type == "message") or final.type == "error"
        return answered and t.safe_after[last]

    @staticmethod
    def _window(t: _Timeline, start: int, end: int) -> list[Event] | None:
        if end <= t.covered_end or end < start:
            return None
        window = [e for e in t.events[start:end + 1] if is_summarizable(e)]
        fresh = [e for e in t.events[t.covered_end + 1:end + 1] if is_summarizable(e)]
        return window if fresh else None
