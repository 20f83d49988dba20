"""Chunk windows: which turns of a session one ``chunk`` record holds, and how its
lines and key read (:mod:`mnemoray.memory.records.distill` makes the records).

A window holds at most ``chunk_turns`` turns and ``chunk_tokens`` tokens (what the
embedder reads whole); a longer turn is cut at sentence ends into parts of about equal
length, each its own line ``[date] speaker (part 2/3): words`` (:data:`PART`), two
parts of one turn never in one window. Tool traffic joins the window of the message
that follows it. Windows are packed in order from the session's start, so only the
last one changes as the session grows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mnemoray.sessions.events import Event, iso
from mnemoray.summarizers.extractive import brief, render_tool_call
from mnemoray.tokens import count_tokens

# Roles whose messages are conversation turns (system messages are instructions).
MESSAGE_ROLES = frozenset({"user", "model"})
# Event types that appear in chunks; the rest is bookkeeping.
_CHUNK_TYPES = frozenset({"message", "tool_call", "tool_result", "error"})
_RESULT_CHARS = 200
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# A chunk's most tokens (mnemoray.tokens.count_tokens) by default: half of what the
# packaged embedder reads (256 word pieces), so neither a chunk nor the facts, topics and
# entities added to its key go unseen by dense recall, and one long answer is several
# items a reader's budget can take one by one.
CHUNK_TOKENS = 128


def is_turn(event: Event) -> bool:
    """A user or model message with text: what ``chunk_turns`` counts."""
    return (
        event.type == "message"
        and event.role in MESSAGE_ROLES
        and not event.partial
        and bool(event.text.strip())
    )


def _in_chunks(event: Event) -> bool:
    if event.partial or event.type not in _CHUNK_TYPES:
        return False
    return is_turn(event) if event.type == "message" else True


@dataclass(frozen=True)
class Line:
    """One line of a chunk: an event's words, or one part of a turn too long for one
    chunk (``part``/``parts`` from 1; 1/1 for a whole event)."""

    event: Event
    body: str
    part: int = 1
    parts: int = 1


def chunk_windows(
    events: Sequence[Event], chunk_turns: int, overlap: int = 0, chunk_tokens: int | None = None
) -> list[list[Line]]:
    """Windows of at most ``chunk_turns`` turns and ``chunk_tokens`` tokens, packed in
    order from the session's start (so only the last ones change as it grows), the
    next starting ``overlap`` turns before the previous one's end. A tool event belongs
    to the turn that follows it, tool events after the last turn to the last window.
    A turn longer than ``chunk_tokens`` is cut at sentence ends into parts of about
    equal length, each a turn of its own: no window is longer than the embedder reads,
    and a long answer does not fill a reader's whole budget."""
    units: list[list[Line]] = []  # one per turn (or part): tool events before it, then it
    pending: list[Line] = []
    for e in events:
        if not _in_chunks(e):
            continue
        if not is_turn(e):
            pending.append(Line(e, _body(e)))
            continue
        head = sum(count_tokens(render_line(line)) for line in pending)
        if chunk_tokens is not None and pending and head > chunk_tokens // 2:
            # Tool traffic that would leave the turn little room: units of its own, each
            # within the cap (a tool line is never cut).
            sizes = [count_tokens(render_line(line)) for line in pending]
            units.extend(pending[i:j] for i, j in _pack(sizes, chunk_tokens))
            pending, head = [], 0
        cut = _parts(e, _body(e), None if chunk_tokens is None else chunk_tokens - head)
        units.append([*pending, cut[0]])
        units.extend([part] for part in cut[1:])
        pending = []
    windows: list[list[Line]] = []
    i = 0
    while i < len(units):
        end, tokens = i, 0
        while end < len(units) and end - i < chunk_turns:
            more = sum(count_tokens(render_line(line)) for line in units[end])
            if end > i and chunk_tokens is not None and tokens + more > chunk_tokens:
                break
            # Two parts of one turn never share a window (one line per event in it).
            if end > i and units[end][0].event is units[end - 1][-1].event:
                break
            tokens += more
            end += 1
        windows.append([line for unit in units[i:end] for line in unit])
        if end >= len(units):
            break
        i = max(end - overlap, i + 1)
    if pending:
        last = windows[-1] if windows else None
        room = chunk_tokens is None or (
            last is not None
            and sum(count_tokens(render_line(line)) for line in [*last, *pending]) <= chunk_tokens
        )
        if (
            last is not None
            and room
            and sum(1 for line in last if is_turn(line.event)) < chunk_turns
        ):
            last.extend(pending)
        else:
            windows.append(pending)
    return windows


def _parts(e: Event, body: str, budget: int | None) -> list[Line]:
    """``body`` whole, or cut at sentence ends (at spaces inside a sentence longer than
    a part) into parts of at most ``budget`` tokens, their line prefix included."""
    whole = Line(e, body)
    if budget is None or count_tokens(render_line(whole)) <= budget:
        return [whole]
    room = max(budget - count_tokens(render_line(Line(e, "", 99, 99))), 16)
    pieces: list[str] = []
    for sentence in _kept_sentences(body):
        if count_tokens(sentence) <= room:
            pieces.append(sentence)
            continue
        run = ""
        for word in sentence.split(" "):
            if run and count_tokens(run + word) > room:
                pieces.append(run)
                run = ""
            run += word + " "
        pieces.append(run)
    sizes = [count_tokens(p) for p in pieces]
    runs = _pack(sizes, room)
    # About equal parts: each piece goes to the part its middle falls in, when no part
    # then passes ``room`` (else the greedy runs): no short last part standing alone.
    target, before, at = sum(sizes) / len(runs), 0, []
    for size in sizes:
        at.append(min(int((before + size / 2) // target), len(runs) - 1))
        before += size
    even = [(at.index(k), len(at) - at[::-1].index(k)) for k in sorted(set(at))]
    if all(sum(sizes[i:j]) <= room for i, j in even):
        runs = even
    groups = ["".join(pieces[i:j]).strip() for i, j in runs]
    groups = [g for g in groups if g]
    return [Line(e, g, k, len(groups)) for k, g in enumerate(groups, start=1)]


def _kept_sentences(text: str) -> list[str]:
    """``text`` cut after each sentence end, the spaces and line breaks kept (the parts
    join back to ``text``)."""
    cuts = [m.end() for m in _SENTENCE_END.finditer(text)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if text[a:b].strip()]


def _pack(sizes: Sequence[int], cap: int) -> list[tuple[int, int]]:
    """Consecutive runs ``[i, j)`` of ``sizes``, each adding up to at most ``cap`` (a
    single larger size alone), packed greedily."""
    runs, start, total = [], 0, 0
    for k, size in enumerate(sizes):
        if k > start and total + size > cap:
            runs.append((start, k))
            start, total = k, 0
        total += size
    if start < len(sizes):
        runs.append((start, len(sizes)))
    return runs


# Where a chunk line starts (each event's line begins with its date), and that date.
LINE_START = re.compile(r"^\[(\d{4}-\d\d-\d\d)\] ", re.M)
# A chunk line's date and speaker, up to its words: "[2023-05-20] assistant (part 2/3): ".
LINE_HEAD = re.compile(r"^\[\d{4}-\d\d-\d\d\] [^:\n]{1,60}?: ", re.M)
# A line of a chunk's text holding part of a long turn: who said it, which part of how
# many. A window holds parts of two turns at most: the last of one, the first of the next.
PART = re.compile(r"^\[\d{4}-\d\d-\d\d\] ([^:\n]{1,60}?) \(part (\d+)/(\d+)\): ", re.M)


def render_line(line: Line) -> str:
    """One chunk line: ``[date] speaker: words`` (tool traffic briefly); a part of a
    long turn says which: ``[date] speaker (part 2/3): words``."""
    e = line.event
    date = f"[{iso(e.timestamp)[:10]}]"
    if e.type == "tool_result":
        return f"{date} {line.body}"
    part = f" (part {line.part}/{line.parts})" if line.parts > 1 else ""
    return f"{date} {e.author}{part}: {line.body}"


def keyed_text(window: Sequence[Line]) -> str:
    """A window's lines for its key: the date only where it changes (a key repeating it on
    every line weighs the date, not the words, in its embedding and its BM25 terms)."""
    lines, last = [], None
    for line in window:
        rendered = render_line(line)
        date = rendered[: rendered.index("]") + 1]
        lines.append(rendered if date != last else rendered[len(date) + 1 :])
        last = date
    return "\n".join(lines)


def _body(e: Event) -> str:
    if e.type == "message":
        return e.text.strip()
    if e.type == "tool_call":
        return f"called {render_tool_call(e)}"
    if e.type == "tool_result":
        return f"{e.data['name']} returned {brief(e.data.get('response'), _RESULT_CHARS)}"
    return f"error: {e.text.strip() or brief(e.data, _RESULT_CHARS)}"


# The lines :func:`expanded_key` adds to a key after its words (no one said them): what
# recall strips before it compares or reads words.
EXPANSION = re.compile(r"\n(?:Facts|Topics|Entities): .*", re.DOTALL)


def expanded_key(
    text: str, facts: Sequence[str], topics: Sequence[str], entities: Sequence[str]
) -> str:
    lines = [text]
    if facts:
        lines.append("Facts: " + " ".join(facts))
    if topics:
        lines.append("Topics: " + ", ".join(topics))
    if entities:
        lines.append("Entities: " + ", ".join(entities))
    return "\n".join(lines)
