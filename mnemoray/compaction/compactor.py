"""Session compaction: summarize older events into a ``compaction`` event.

Whatever the trigger, the newest ``keep_last`` completed invocations, and anything
after them (the invocation in progress), stay raw: a window ends before them, so the
model always reads the last turns in full and older ones as summaries (``0`` keeps
nothing back).

Like ADK's context compaction, a sliding window over *invocations*: once
``interval`` invocations have completed since the last compaction, not counting
the kept ones, those new ones plus the last ``overlap`` invocations before them
are summarized (``keep_last=0`` is ADK's window, which takes the newest too). A
token threshold is a second trigger: when the summaries a compile would show
plus everything not yet covered exceed it, all of it before the kept invocations
is compacted (from the start of the session when the summaries alone take half
the threshold, so one summary replaces them all; the summarizer then reads those
summaries and the uncovered events, never the whole history, so its input stays
bounded however long the session grows). A token-threshold summary no shorter
than what it would replace is not written: it would only grow the context, and the
next trigger takes a longer window.
Semantic ``boundaries`` (topic shift, task done, an explicit phrase;
:mod:`mnemoray.compaction.boundaries`) close a segment: the events before a boundary are
compacted as one window once they all lie before the kept invocations, and no
sliding window crosses a boundary.

Raw events always stay in the store; the compaction event only adds a summary
layer naming exactly the events it summarized (``data["source_event_ids"]``),
with the trigger that fired and the raw and summary token counts.
Window safety (tool calls with their results, nothing pending):
:mod:`mnemoray.compaction.timeline`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from mnemoray.compaction.boundaries import Encode, find_boundaries
from mnemoray.compaction.fields import BOUNDARY_KINDS, CONFIG_PREFIX, FIELDS, default
from mnemoray.compaction.timeline import (
    Timeline,
    event_tokens,
    is_summarizable,
)
from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore
from mnemoray.summarizers.base import Summarizer
from mnemoray.tokens import count_tokens

__all__ = ["COMPACTOR_AUTHOR", "CompactionConfig", "Compactor", "Plan"]

COMPACTOR_AUTHOR = "compactor"


@dataclass(frozen=True)
class CompactionConfig:
    """A compaction policy; fields, defaults and bounds: :mod:`mnemoray.compaction.fields`."""

    interval: int | None = default("interval")  # compact every N new (completed) invocations
    overlap: int = default("overlap")  # invocations re-included from the previous window
    token_threshold: int | None = default("token_threshold")  # uncovered tokens over this
    keep_last: int = default("keep_last")  # newest completed invocations kept raw
    boundaries: tuple[str, ...] = FIELDS["boundaries"].default  # topic_shift, task_done, phrase
    topic_shift_threshold: float = default("topic_shift_threshold")

    def __post_init__(self) -> None:
        for name in ("interval", "overlap", "token_threshold", "keep_last"):
            value, spec = getattr(self, name), FIELDS[name]
            if value is None and spec.optional:
                continue
            assert spec.ge is not None  # every int field has its lower bound
            if not isinstance(value, int) or isinstance(value, bool) or value < spec.ge:
                optional = " or None" if spec.optional else ""
                raise InvalidInput(
                    f"must be an int >= {spec.ge:g}{optional}, got {value!r}",
                    field=f"{CONFIG_PREFIX}{name}",
                )
        # Type first: a client's control event may hold anything (None, a number).
        b = self.boundaries
        if not isinstance(b, (list, tuple)) or not all(
            isinstance(k, str) and k in BOUNDARY_KINDS for k in b
        ):
            raise InvalidInput(
                f"must be a list of {', '.join(BOUNDARY_KINDS)}, got {b!r}",
                field=f"{CONFIG_PREFIX}boundaries",
            )
        object.__setattr__(self, "boundaries", tuple(dict.fromkeys(b)))
        t, spec = self.topic_shift_threshold, FIELDS["topic_shift_threshold"]
        assert spec.ge is not None and spec.le is not None  # a bounded field
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not spec.ge <= t <= spec.le:
            raise InvalidInput(
                f"must be a number in [{spec.ge:g}, {spec.le:g}], got {t!r}",
                field=f"{CONFIG_PREFIX}topic_shift_threshold",
            )

    @property
    def enabled(self) -> bool:
        """Whether any trigger can fire."""
        return (
            self.interval is not None or self.token_threshold is not None or bool(self.boundaries)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
            for f in fields(self)
        }

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> CompactionConfig:
        """This config with some fields replaced (a session's own policy over the app's)."""
        if not overrides:
            return self
        known = {f.name for f in fields(self)}
        for key in overrides:
            if key not in known:
                raise InvalidInput(
                    f"unknown compaction setting; known: {', '.join(sorted(known))}",
                    field=f"{CONFIG_PREFIX}{key}",
                )
        values = dict(overrides)
        if isinstance(values.get("boundaries"), list):
            values["boundaries"] = tuple(values["boundaries"])
        return replace(self, **values)


@dataclass(frozen=True)
class Plan:
    """The next window to compact and the trigger that chose it. ``inputs``: what the
    summarizer reads when that is not the window itself (a roll-up reads the earlier
    summaries in place of the events they cover, so its prompt stays bounded)."""

    events: list[Event]
    trigger: str
    inputs: list[Event] | None = None


def summary_input(compaction: Event) -> Event:
    """An earlier summary as a summarizer reads it: a system message of the compactor's,
    dated at the end of the events it covers (every summarizer reads messages; some skip
    compaction events). No label is added to the text: a roll-up of a roll-up would
    carry it twice."""
    return Event(
        author=COMPACTOR_AUTHOR,
        role="system",
        type="message",
        id=compaction.id,
        text=compaction.text,
        timestamp=compaction.data.get("end_ts", compaction.timestamp),
    )


class Compactor:
    """Decides when and what to compact; the summarizer decides how.

    ``encode`` (texts -> vectors, e.g. the configured embedder's ``encode``) feeds
    the ``topic_shift`` boundary; without it a deterministic lexical stand-in is used.
    """

    def __init__(
        self, summarizer: Summarizer, config: CompactionConfig, *, encode: Encode | None = None
    ) -> None:
        if not callable(getattr(summarizer, "summarize", None)):
            raise TypeError(f"summarizer: expected a Summarizer, got {type(summarizer).__name__}")
        if not isinstance(config, CompactionConfig):
            raise TypeError(f"config: expected CompactionConfig, got {type(config).__name__}")
        self.summarizer = summarizer
        self.config = config
        self.encode = encode

    def plan(self, session: Session) -> list[Event] | None:
        """The events the next compaction would summarize, or None; writes nothing."""
        planned = self.plan_window(session)
        return None if planned is None else planned.events

    def plan_window(self, session: Session) -> Plan | None:
        """:meth:`plan` with the trigger that fired."""
        t = Timeline.of(session)
        horizon = self._horizon(t)
        cut, kind = self._boundary_cut(t)
        sliding = self._sliding_window(t, horizon if cut is None else min(cut, horizon))
        if sliding:
            return Plan(sliding, "interval")
        # A segment waits until it is wholly older than the kept invocations, so it is
        # still summarized as one window.
        if cut is not None and cut <= horizon:
            window = self._window(t, t.safe_start(t.covered_end + 1), cut)
            if window:
                return Plan(window, kind)
        return self._token_window(t, horizon)

    def summarize(self, session: Session, planned: Plan) -> Event:
        """The compaction event of ``planned`` (calls the summarizer; writes nothing)."""
        window = planned.events
        summary = self.summarizer.summarize(window if planned.inputs is None else planned.inputs)
        latest = max((e.timestamp for e in session.events), default=0.0)
        return Event(
            author=COMPACTOR_AUTHOR,
            role="system",
            type="compaction",
            text=summary.summary,
            # JSON round trip: the stored form is what every store reads back.
            data=json.loads(
                json.dumps(
                    {
                        "start_ts": window[0].timestamp,
                        "end_ts": window[-1].timestamp,
                        "summary": summary.to_dict(),
                        "source_event_ids": [e.id for e in window],
                        "trigger": planned.trigger,
                        "raw_tokens": sum(event_tokens(e) for e in window),
                        "summary_tokens": count_tokens(summary.summary),
                    }
                )
            ),
            # Never earlier than what it summarizes, even for back-dated sessions.
            timestamp=max(time.time(), latest),
        )

    @staticmethod
    def shrinks(planned: Plan, event: Event) -> bool:
        """Whether ``event`` is worth writing: a token-threshold summary must be shorter
        than what a compile shows of its window now (a roll-up replaces the summaries it
        read). Interval and boundary summaries are what their policy asks for."""
        if planned.trigger != "token_threshold":
            return True
        shown = planned.events if planned.inputs is None else planned.inputs
        return int(event.data["summary_tokens"]) < sum(map(event_tokens, shown))

    def maybe_compact(self, store: SessionStore, session: Session) -> Event | None:
        """Append one compaction event if a trigger fires and its summary
        :meth:`shrinks` the window; return it (else None)."""
        planned = self.plan_window(session)
        if planned is None:
            return None
        event = self.summarize(session, planned)
        return store.append_event(session, event) if self.shrinks(planned, event) else None

    # -- triggers ------------------------------------------------------------
    def _horizon(self, t: Timeline) -> int:
        """The last index any window may end at: before the newest ``keep_last``
        completed invocations (-1: nothing may be compacted yet). One answered while an
        older call is pending counts: what is pending is kept raw by the safe cuts."""
        keep = self.config.keep_last
        if keep == 0:
            return len(t.events) - 1
        done = len(t.invocations)
        if done and not self._answered(t, done - 1):
            done -= 1
        return -1 if done < keep else t.invocations[done - keep][0] - 1

    def _boundary_cut(self, t: Timeline) -> tuple[int | None, str]:
        """Where the first boundary after the covered part closes a segment."""
        if not self.config.boundaries:
            return None, ""
        start = t.covered_end + 1
        turns = [g for g in t.invocations if g[0] >= start]
        for b in find_boundaries(
            t.events,
            turns,
            self.config.boundaries,
            threshold=self.config.topic_shift_threshold,
            encode=self.encode,
        ):
            cut = t.last_safe_at_or_before(b.index - 1, start)
            if cut >= start and any(is_summarizable(e) for e in t.events[start : cut + 1]):
                return cut, b.kind
        return None, ""

    def _sliding_window(self, t: Timeline, limit: int) -> list[Event] | None:
        """``limit``: the last index the window may end at (kept invocations, a boundary)."""
        interval = self.config.interval
        if interval is None:
            return None
        new = [
            k
            for k, (first, last) in enumerate(t.invocations)
            if first > t.covered_end and last <= limit and self._completed(t, k)
        ]
        if len(new) < interval:
            return None
        first_group = max(0, new[0] - self.config.overlap)
        start = t.safe_start(min(t.invocations[first_group][0], t.covered_end + 1))
        target = t.invocations[new[-1]][1]
        # Extend to take in results that already exist; else shrink so the
        # unanswered call stays raw. Never past a boundary or into the kept invocations.
        end = t.first_safe_at_or_after(target)
        if end is None or end > limit:
            end = t.last_safe_at_or_before(target, start)
        return self._window(t, start, end)

    def _token_window(self, t: Timeline, horizon: int) -> Plan | None:
        threshold = self.config.token_threshold
        if threshold is None:
            return None
        uncovered = [e for e in t.events[t.covered_end + 1 :] if is_summarizable(e)]
        summaries = t.summary_tokens()
        if summaries + sum(map(event_tokens, uncovered)) <= threshold:
            return None
        # Summaries that crowd the budget are rolled up into the new one.
        roll_up = summaries > threshold // 2
        start = 0 if roll_up else t.safe_start(t.covered_end + 1)
        # The kept invocations are a floor: a call/result pair straddling them stays raw.
        end = t.last_safe_at_or_before(horizon, start)
        window = self._window(t, start, end)
        if window is None:
            return None
        if not roll_up:
            return Plan(window, "token_threshold")
        # The new event covers every event since the start, but the summarizer reads only
        # the summaries shown now and the events none of them covers.
        covered = t.covered()
        inputs = [summary_input(c) for c in t.live_compactions()] + [
            e for i, e in enumerate(t.events[: end + 1]) if is_summarizable(e) and not covered[i]
        ]
        return Plan(window, "token_threshold", inputs)

    @staticmethod
    def _answered(t: Timeline, k: int) -> bool:
        """The invocation's turn is over: the model answered, or it failed."""
        first, last = t.invocations[k]
        final = [e for e in t.events[first : last + 1] if is_summarizable(e)][-1]
        return (final.role == "model" and final.type == "message") or final.type == "error"

    @classmethod
    def _completed(cls, t: Timeline, k: int) -> bool:
        """Earlier invocations are done; the last one once answered with nothing pending."""
        if k < len(t.invocations) - 1:
            return True
        return cls._answered(t, k) and t.safe_after[t.invocations[k][1]]

    @staticmethod
    def _window(t: Timeline, start: int, end: int) -> list[Event] | None:
        if end <= t.covered_end or end < start:
            return None
        window = [e for e in t.events[start : end + 1] if is_summarizable(e)]
        fresh = [e for e in t.events[t.covered_end + 1 : end + 1] if is_summarizable(e)]
        return window if fresh else None
