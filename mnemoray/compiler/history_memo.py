"""The history processor's output per session and agent, reused while the log only grows.

Compiling a long session is mostly re-deriving what the previous compile of the
same session derived: which events are shown and how each one looks. A snapshot
keeps that (the sorted history, the rendered contents, the trace's figures) with
the event list it came from. The next compile of the same session and agent
reuses it when its log starts with those events:

- the same event objects (an in-process agent): one C-level list comparison;
- equal events in new objects (a server that loads the session from its store):
  one pass comparing the fields selection and rendering read;
- plus events appended since: only those are sorted and rendered, as long as the
  selection is the plain one (every visible event, no compaction) and no new tool
  call claims a result already shown (its owner, hence its rendering, would change).

Anything else (a compaction, ``include_contents="none"``, an edited log) is
selected in full (a grown log still sorts only its new events) and rendered
through the per-event :data:`mnemoray.compiler.casting.CACHE`. A plain selection
is rendered without that cache: its snapshot keeps the renderings, and the
only compile that renders them is one that has neither. Equal inputs give equal output, so a
snapshot never changes a compile's result, only its cost.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from mnemoray.compiler.casting import CACHE, owners, render_each
from mnemoray.compiler.request import Content
from mnemoray.compiler.selection import History, Selection, select, sort_history
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session

Key = tuple[str, str, str, str, str]  # app, user, session, agent, include_contents
_tokens = attrgetter("tokens")


@dataclass(frozen=True)
class HistoryView:
    """What the history processor adds and traces. Shared between compiles:
    callers copy the lists before changing them."""

    contents: list[Content]
    tokens: int
    event_ids: list[str]
    compactions: list[str]
    covered: int
    skipped: dict[str, int]  # reasons with a non-zero count
    compression_ratio: float | None


@dataclass(frozen=True)
class _Snapshot:
    events: list[Event]
    history: History
    growable: bool  # the plain selection: appended events only append contents
    view: HistoryView
    # What it pins, in tokens: the contents shown plus the raw tokens of the events
    # the compactions shown stand for (still in ``events``).
    tokens: int


class HistoryMemo:
    """Snapshots for the most recently compiled sessions, bounded by the events and
    the tokens they hold (oldest stored first out).

    An event may be up to a MiB (:data:`mnemoray.limits.MAX_EVENT_BYTES`) and a
    snapshot keeps its rendering and the event, so an event bound alone would let a
    replica compiling a few sessions with large tool results pin gigabytes. A snapshot
    over ``max_entry_tokens`` is not kept (its compile pays for a full selection, as
    :class:`~mnemoray.compiler.casting.RenderCache` re-renders its huge payloads):
    history that long is past any model's context window.
    """

    def __init__(
        self,
        max_events: int = 50_000,
        max_tokens: int = 4_000_000,
        max_entry_tokens: int = 1_000_000,
    ) -> None:
        self.max_events = max_events
        self.max_tokens = max_tokens
        self.max_entry_tokens = max_entry_tokens
        self._snapshots: dict[Key, _Snapshot] = {}
        self._events = 0
        self._tokens = 0
        self._lock = threading.Lock()  # guards store + evict; lookups are lock-free

    def view(self, session: Session, agent_name: str, include_contents: str) -> HistoryView:
        events = session.events
        key = (session.app_name, session.user_id, session.session_id, agent_name, include_contents)
        snapshot = self._snapshots.get(key)
        history = None
        if snapshot is not None and starts_with(events, snapshot.events):
            if len(events) == len(snapshot.events):
                return snapshot.view
            if snapshot.growable:
                grown = _grow(snapshot, events, agent_name)
                if grown is not None:
                    self._store(key, grown)
                    return grown.view
            # Selected anew, but only the new events need sorting.
            history = sort_history(events[len(snapshot.events) :], snapshot.history)
        if history is None:
            history = sort_history(events)
        selection = select(events, include_contents, history)
        growable = include_contents == "default" and not history.compactions
        view, hidden = _render(selection, agent_name, cached=not growable)
        # (A log's own figures: never below zero, or a bad one would lift the bound.)
        fresh = _Snapshot(list(events), history, growable, view, view.tokens + max(hidden, 0))
        self._store(key, fresh)
        return fresh.view

    def _store(self, key: Key, snapshot: _Snapshot) -> None:
        size = len(snapshot.events)
        if size > self.max_events or snapshot.tokens > min(self.max_entry_tokens, self.max_tokens):
            return
        with self._lock:
            old = self._snapshots.pop(key, None)
            if old is not None:
                self._events -= len(old.events)
                self._tokens -= old.tokens
            self._events += size
            self._tokens += snapshot.tokens
            self._snapshots[key] = snapshot
            while self._events > self.max_events or self._tokens > self.max_tokens:
                evicted = self._snapshots.pop(next(iter(self._snapshots)))
                self._events -= len(evicted.events)
                self._tokens -= evicted.tokens

    def clear(self) -> None:
        with self._lock:
            self._snapshots.clear()
            self._events = 0
            self._tokens = 0

    @property
    def tokens(self) -> int:
        """Tokens the kept snapshots pin (what ``max_tokens`` bounds)."""
        return self._tokens

    def __len__(self) -> int:
        return len(self._snapshots)


def starts_with(events: Sequence[Event], prefix: list[Event]) -> bool:
    """Whether ``events`` begins with ``prefix``: the same objects, or new objects
    equal in every field that selection and rendering read."""
    n = len(prefix)
    if len(events) < n:
        return False
    if n == 0:
        return True
    if events[0] is prefix[0] and events[n - 1] is prefix[n - 1]:
        # Compares identity first, element by element in C; an element replaced
        # by another object falls back to comparing the events' fields.
        return list(events[:n]) == prefix
    for old, new in zip(prefix, events, strict=False):  # events may be longer
        if old is not new and not (
            old.id == new.id
            and old.text == new.text
            and old.type == new.type
            and old.author == new.author
            and old.role == new.role
            and old.partial == new.partial
            and old.timestamp == new.timestamp
            and old.data == new.data
        ):
            return False
    return True


def _grow(snapshot: _Snapshot, events: Sequence[Event], agent_name: str) -> _Snapshot | None:
    """The snapshot extended by the events after it, or None when that needs a
    full selection."""
    added = events[len(snapshot.events) :]
    before = snapshot.history
    for event in added:
        if event.type == "compaction" or (
            event.type == "tool_call"
            and not event.partial
            and event.data["call_id"] in before.result_calls
        ):
            return None
    history = sort_history(added, before)
    new_raw = history.raw[len(before.raw) :]
    contents = render_each(new_raw, agent_name, owners(new_raw, history.call_owner))
    view = snapshot.view
    added_tokens = sum(map(_tokens, contents))
    return _Snapshot(
        snapshot.events + list(added),
        history,
        True,
        HistoryView(
            view.contents + contents,
            view.tokens + added_tokens,
            view.event_ids + [e.id for e in new_raw],
            [],
            0,
            {k: v for k, v in history.skipped.items() if v},
            None,
        ),
        snapshot.tokens + added_tokens,
    )


def _render(selection: Selection, agent_name: str, cached: bool) -> tuple[HistoryView, int]:
    """The view, and the raw tokens its compactions' summaries stand for.

    ``cached``: through the per-event cache, for selections made anew on every
    compile; a plain one lives on in its snapshot and is only ever extended."""
    events = selection.events
    by = owners(events, selection.call_owner)
    contents = (
        CACHE.render_all(events, agent_name, by) if cached else render_each(events, agent_name, by)
    )
    # Raw tokens the shown summaries replace, per summary token (where compactions
    # recorded both: mnemoray.compaction.compactor).
    used = [e.data for e in selection.events if e.type == "compaction"]
    raw = sum(d.get("raw_tokens", 0) for d in used)
    summary = sum(d.get("summary_tokens", 0) for d in used)
    return HistoryView(
        contents,
        sum(map(_tokens, contents)),
        [e.id for e in selection.events],
        selection.compactions_used,
        selection.covered,
        {k: v for k, v in selection.skipped.items() if v},
        round(raw / summary, 2) if raw and summary else None,
    ), raw


MEMO = HistoryMemo()


def clear_caches() -> None:
    """Forget every snapshot and rendering (as in a process that never compiled
    these events; the token counter's memo of texts stays)."""
    MEMO.clear()
    CACHE.clear()
