"""Distill a session into memory records (docs/architecture.md, "Memory records").

A session becomes several kinds of record, so nothing is lost to
summarization and every record names exactly the events it came from:

- ``session_summary``: the summarizer's summary of the session, with its
  topics, key facts and entities;
- ``fact``: one per key fact (the fact's own source events), keyed with the name of
  the person who said it where a user turn names one;
- ``chunk``: the raw turns, in windows of at most ``chunk_turns`` messages and
  ``chunk_tokens`` tokens (what the embedder reads), each turn in one window (a
  longer turn cut into parts at sentence ends), each line prefixed with its date
  and speaker; the key (what is embedded and keyword-indexed) names the date once,
  not per line;
- ``compaction_summary``: one per compaction event already in the session.

Compaction summaries are reused, never recomputed: the session summary is
computed over the compaction summaries (as stand-in events) plus the raw
events no compaction covers, and the key facts stored in a compaction are
taken as they are, with their provenance. The summarizer never sees an event
a compaction already summarized.

Distillation is deterministic (same session, same ``now`` -> same records;
identity is the content hash), and embedding is not done here: the memory
service embeds each record's ``key_text``.

Chunk windows are packed in order from the start of the session and a tool call or
result joins the window of the message that follows it, so a window that another
follows never changes as the session grows: only the last window, the summary and
the facts are superseded by re-ingestion.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.memory.records.kinds import MemoryKind
from mnemoray.memory.records.record import Memory
from mnemoray.memory.records.windows import (
    CHUNK_TOKENS,
    MESSAGE_ROLES,
    chunk_windows,
    expanded_key,
    keyed_text,
    render_line,
)
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.summarizers.base import Fact, Summarizer, Summary
from mnemoray.text import stem, words

_NOT_CONTENT = frozenset({"compaction", "control"})
# Author of a stand-in event for summary text that names no speaker.
STAND_IN_AUTHOR = "earlier_summary"
_SPEAKER_LINE = re.compile(r"^([^:\n]{1,60}):\s+(\S.*)$")


def distill_session(
    session: Session,
    summarizer: Summarizer | None,
    *,
    chunk_turns: int = 4,
    expand_keys: bool = True,
    ttl_s: float | None = None,
    now: float | None = None,
    summarize: bool = True,
    chunk_overlap: int | None = None,
    chunk_tokens: int | None = CHUNK_TOKENS,
) -> list[Memory]:
    """The memory records of ``session`` (not embedded), in a stable order.

    ``summarize=False``: raw chunks only (for apps that keep conversations without
    summarization): no session summary, facts or compaction summaries, and the
    summarizer (which may then be None) is never called.

    ``chunk_turns``: most user/model messages per chunk; ``chunk_tokens``: most tokens
    per chunk (None: no cap), a longer turn cut into parts. ``chunk_overlap``: turns a
    chunk shares with the next one (None: none; at most ``chunk_turns - 1``).
    ``expand_keys``: append a chunk's facts (those not already in its words), topics
    and entities to its ``key_text`` (what is embedded and keyword-indexed); ``text``
    always stays the original words.
    ``ttl_s``: records expire that many seconds after ``now`` (default: the
    current time, which is also every record's ``created_at``).
    """
    if not isinstance(chunk_turns, int) or isinstance(chunk_turns, bool) or chunk_turns < 1:
        raise InvalidInput(f"must be a positive int, got {chunk_turns!r}", field="chunk_turns")
    # None: no overlap, so every turn is kept once and recall has no copies to skip.
    overlap = 0 if chunk_overlap is None else chunk_overlap
    if not isinstance(overlap, int) or isinstance(overlap, bool) or overlap < 0:
        raise InvalidInput(f"must be an int >= 0, got {chunk_overlap!r}", field="chunk_overlap")
    overlap = min(overlap, chunk_turns - 1)
    if chunk_tokens is not None and (
        not isinstance(chunk_tokens, int) or isinstance(chunk_tokens, bool) or chunk_tokens < 32
    ):
        raise InvalidInput(
            f"must be an int >= 32 or None, got {chunk_tokens!r}", field="chunk_tokens"
        )
    if ttl_s is not None and (
        isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or ttl_s <= 0
    ):
        raise InvalidInput(
            f"must be a positive number of seconds or None, got {ttl_s!r}", field="ttl_s"
        )
    if summarize and not callable(getattr(summarizer, "summarize", None)):
        raise TypeError(f"summarizer: expected a Summarizer, got {type(summarizer).__name__}")
    events = [e for e in session.events if not e.partial]
    if not events:
        return []
    created_at = time.time() if now is None else float(now)
    ctx = _Context(
        session, events, created_at, None if ttl_s is None else created_at + float(ttl_s)
    )
    compactions = _compactions(events) if summarize else []
    summary, facts = (
        _summarize(ctx, summarizer, compactions)
        if summarize and summarizer is not None
        else (None, [])
    )
    records: list[Memory] = []
    if summary is not None and summary.summary.strip():
        ids = summary.source_event_ids
        topics = tuple(summary.topics)
        key = summary.summary
        if expand_keys and topics:
            key += "\nTopics: " + ", ".join(topics)
        records.append(
            ctx.memory(
                "session_summary",
                summary.summary,
                ids,
                key_text=key,
                topics=topics,
                key_facts=tuple(f.text for f in facts),
                entities=tuple(summary.entities),
                outcomes=summary,
            )
        )
    entities = _unique(
        [
            *(summary.entities if summary else ()),
            *(n for c in compactions for n in c.summary.entities),
        ]
    )
    for fact in facts:
        records.append(
            ctx.memory(
                "fact",
                fact.text,
                fact.source_event_ids,
                key_text=_fact_key(ctx, fact),
                entities=_named_in(entities, fact.text),
            )
        )
    for c in compactions:
        start, end = ctx.times(c.source_event_ids)
        records.append(
            ctx.memory(
                "compaction_summary",
                c.text,
                c.source_event_ids,
                topics=c.summary.topics,
                key_facts=tuple(f.text for f in c.summary.key_facts),
                entities=c.summary.entities,
                outcomes=c.summary,
                times=(
                    start if start is not None else c.start_ts,
                    end if end is not None else c.end_ts,
                ),
            )
        )

    all_topics = _unique(
        [*(summary.topics if summary else ()), *(t for c in compactions for t in c.summary.topics)]
    )
    for window in chunk_windows(events, chunk_turns, overlap, chunk_tokens):
        text = "\n".join(render_line(line) for line in window)
        ids = tuple(dict.fromkeys(line.event.id for line in window))
        members = set(ids)
        chunk_facts = tuple(f.text for f in facts if members.intersection(f.source_event_ids))
        # A fact quoted from the window itself adds nothing to its key but weight.
        new_facts = tuple(f for f in chunk_facts if f not in text)
        # What was said, not who said it or when ("travel_agent" is no topic).
        said = "\n".join(line.body for line in window)
        chunk_terms = {stem(w) for w in words(said)}
        chunk_topics = tuple(
            t for t in all_topics if (ts := {stem(w) for w in words(t)}) and ts <= chunk_terms
        )
        chunk_entities = _named_in(entities, said)
        key = text
        if expand_keys:
            key = expanded_key(keyed_text(window), new_facts, chunk_topics, chunk_entities)
        records.append(
            ctx.memory(
                "chunk",
                text,
                ids,
                key_text=key,
                topics=chunk_topics,
                key_facts=chunk_facts,
                entities=chunk_entities,
            )
        )

    unique: dict[str, Memory] = {}
    for record in records:
        unique.setdefault(record.memory_id, record)
    return list(unique.values())


# -- context -------------------------------------------------------------------
class _Context:
    """Positions, times and the record constructor for one session."""

    def __init__(
        self, session: Session, events: list[Event], created_at: float, expires_at: float | None
    ) -> None:
        self.session = session
        self.events = events
        self.by_id = {e.id: e for e in events}
        self.position = {e.id: i for i, e in enumerate(events)}
        self.created_at = created_at
        self.expires_at = expires_at

    def ordered(self, ids: Iterable[str]) -> tuple[str, ...]:
        """Unique ids in session order; ids not in the session keep their order, last."""
        far = len(self.position)
        unique = list(dict.fromkeys(ids))
        ranked = sorted(enumerate(unique), key=lambda p: (self.position.get(p[1], far), p[0]))
        return tuple(i for _, i in ranked)

    def times(self, ids: Iterable[str]) -> tuple[float | None, float | None]:
        stamps = [self.by_id[i].timestamp for i in ids if i in self.by_id]
        return (min(stamps), max(stamps)) if stamps else (None, None)

    def memory(
        self,
        kind: MemoryKind,
        text: str,
        ids: Sequence[str],
        *,
        key_text: str = "",
        topics: Sequence[str] = (),
        key_facts: Sequence[str] = (),
        entities: Sequence[str] = (),
        times: tuple[float | None, float | None] | None = None,
        outcomes: Summary | None = None,
    ) -> Memory:
        """A record of this session; ``outcomes``: the summary whose open threads,
        decisions and commitments the record keeps."""
        start, end = self.times(ids) if times is None else times
        s = self.session
        return Memory(
            app_name=s.app_name,
            user_id=s.user_id,
            session_id=s.session_id,
            kind=kind,
            text=text,
            source_event_ids=tuple(ids),
            key_text=key_text,
            topics=tuple(topics),
            key_facts=tuple(key_facts),
            entities=tuple(entities),
            event_time_start=start,
            event_time_end=end,
            created_at=self.created_at,
            expires_at=self.expires_at,
            open_threads=_texts(outcomes.open_threads) if outcomes else (),
            decisions=_texts(outcomes.decisions) if outcomes else (),
            commitments=_texts(outcomes.commitments) if outcomes else (),
        )


# -- compaction events ------------------------------------------------------------
@dataclass(frozen=True)
class _Compaction:
    event: Event
    text: str
    summary: Summary  # structured form when the compactor stored one
    source_event_ids: tuple[str, ...]
    start_ts: float
    end_ts: float
    structured: bool  # the stored summary carries its own key facts

    @classmethod
    def of(cls, event: Event, events: Sequence[Event]) -> _Compaction | None:
        data = event.data
        stored: Any = data.get("summary")
        if isinstance(stored, dict):
            summary = Summary.from_dict(stored)
        else:  # ADK writes the summary as text
            summary = Summary(summary=stored if isinstance(stored, str) else "")
        text = (event.text or summary.summary).strip()
        if not text:
            return None  # nothing to reuse: its events are summarized as raw events
        start, end = float(data["start_ts"]), float(data["end_ts"])
        ids = data.get("source_event_ids")
        if isinstance(ids, (list, tuple)) and ids:
            sources = tuple(str(i) for i in ids)
        else:  # written elsewhere: its time range says what it covered
            sources = tuple(
                e.id for e in events if e.type not in _NOT_CONTENT and start <= e.timestamp <= end
            )
        if not sources:
            return None
        return cls(event, text, summary, sources, start, end, bool(summary.key_facts))


def _reused(compactions: Sequence[_Compaction]) -> list[_Compaction]:
    """Compactions whose events no other compaction summarizes as well or later."""
    keep: list[_Compaction] = []
    for i, c in enumerate(compactions):
        mine = set(c.source_event_ids)
        if not any(
            j != i
            and mine <= set(d.source_event_ids)
            and (mine != set(d.source_event_ids) or j > i)
            for j, d in enumerate(compactions)
        ):
            keep.append(c)
    return keep


def _stand_ins(c: _Compaction, speakers: dict[str, tuple[str, str]]) -> list[Event]:
    """A compaction summary as events the summarizer can read.

    A summary written as ``Speaker: words`` lines (the extractive format)
    becomes one event per line with that speaker's role; other text is one
    event from :data:`STAND_IN_AUTHOR`.
    """
    out: list[tuple[str, str, str]] = []  # (author, role, text)
    for line in (ln.strip() for ln in c.text.splitlines()):
        if not line:
            continue
        m = _SPEAKER_LINE.match(line)
        speaker = speakers.get(m.group(1).strip().casefold()) if m else None
        if m and speaker:
            out.append((*speaker, m.group(2).strip()))
        elif out:
            author, role, text = out[-1]
            out[-1] = (author, role, f"{text}\n{line}")
        else:
            out.append((STAND_IN_AUTHOR, "model", line))
    return [
        Event(
            author=author,
            role=role,  # type: ignore[arg-type]  # "user" or "model" (_speakers)
            type="message",
            text=text,
            id=f"{c.event.id}#{j}",
            session_id=c.event.session_id,
            invocation_id=c.event.invocation_id,
            timestamp=c.start_ts,
        )
        for j, (author, role, text) in enumerate(out)
    ]


def _speakers(events: Sequence[Event]) -> dict[str, tuple[str, str]]:
    """Labels a summary line may start with -> (author, role) of that speaker."""
    found: dict[str, tuple[str, str]] = {"user": ("user", "user")}
    for e in events:
        if e.type not in _NOT_CONTENT:
            found.setdefault(e.author.casefold(), (e.author, e.role))
            if e.type in ("tool_call", "tool_result"):
                found.setdefault(str(e.data["name"]).casefold(), (str(e.data["name"]), "tool"))
    return found


def _compactions(events: Sequence[Event]) -> list[_Compaction]:
    return [
        c
        for c in (_Compaction.of(e, events) for e in events if e.type == "compaction")
        if c is not None
    ]


# -- summary and facts ----------------------------------------------------------------
def _fact_key(ctx: _Context, fact: Fact) -> str:
    """A fact a person said by name keys with who said it ("Katherine: I finished ..."):
    in a conversation between people both say "I" (each a ``user`` turn under their
    name), and a question asks by name whose fact it is. A fact of the ``user`` author
    keys as its words ("")."""
    said = [ctx.by_id[i] for i in fact.source_event_ids if i in ctx.by_id]
    authors = {e.author for e in said}
    if len(authors) != 1 or any(e.role != "user" for e in said):
        return ""
    author = authors.pop()
    return "" if not author or author.lower() == "user" else f"{author}: {fact.text}"


@dataclass(frozen=True)
class _Plan:
    """What the summarizer reads, and how stand-in events map back to real ones."""

    inputs: list[Event]
    stand_in_sources: dict[str, tuple[str, ...]]
    stand_in_structured: dict[str, bool]


def summary_inputs(session: Session) -> list[Event]:
    """The events ``distill_session`` hands its summarizer for ``session`` ([]: no call).

    A batch engine (``ray.data.llm``) can summarize these ahead of time; replaying
    its output through ``distill_session`` then gives the same records.
    """
    events = [e for e in session.events if not e.partial]
    if not events:
        return []
    plan = _plan(_Context(session, events, 0.0, None), _compactions(events))
    return [] if plan is None else plan.inputs


def _plan(ctx: _Context, compactions: list[_Compaction]) -> _Plan | None:
    events = ctx.events
    has_text = any(
        e.type == "message" and e.role in MESSAGE_ROLES and e.text.strip() for e in events
    )
    if not has_text:
        return None
    covered = {i for c in compactions for i in c.source_event_ids}
    speakers = _speakers(events)
    far = len(events)
    # (position, tie, events) of everything the summarizer reads, in session order.
    parts: list[tuple[int, int, list[Event]]] = []
    stand_in_sources: dict[str, tuple[str, ...]] = {}
    stand_in_structured: dict[str, bool] = {}
    for c in _reused(compactions):
        inside = [ctx.position[i] for i in c.source_event_ids if i in ctx.position]
        stand = _stand_ins(c, speakers)
        for e in stand:
            stand_in_sources[e.id] = c.source_event_ids
            stand_in_structured[e.id] = c.structured
        parts.append((min(inside, default=ctx.position.get(c.event.id, far)), 0, stand))
    for i, e in enumerate(events):
        if e.type not in _NOT_CONTENT and e.id not in covered:
            parts.append((i, 1, [e]))
    parts.sort(key=lambda p: (p[0], p[1]))
    inputs = [e for _, _, group in parts for e in group]
    return _Plan(inputs, stand_in_sources, stand_in_structured) if inputs else None


def _summarize(
    ctx: _Context,
    summarizer: Summarizer,
    compactions: list[_Compaction],
) -> tuple[Summary | None, list[Fact]]:
    """The session summary (source ids mapped to real events) and the key facts."""
    plan = _plan(ctx, compactions)
    if plan is None:
        return None, []
    inputs = plan.inputs
    stand_in_sources, stand_in_structured = plan.stand_in_sources, plan.stand_in_structured
    summary = summarizer.summarize(inputs)

    def real(ids: Iterable[str]) -> list[str]:
        out: list[str] = []
        for i in ids:
            out.extend(stand_in_sources.get(i, (i,)))
        return out

    summarized = summary.source_event_ids or tuple(e.id for e in inputs)
    mapped = replace(summary, source_event_ids=ctx.ordered(real(summarized)))

    candidates: list[Fact] = [
        Fact(f.text, ctx.ordered(f.source_event_ids))
        for c in compactions
        for f in c.summary.key_facts
    ]
    for fact in summary.key_facts:
        ids = fact.source_event_ids
        stand = [i for i in ids if i in stand_in_sources]
        # A fact read back off a compaction that stored its own facts is a
        # second copy of one of them: those are reused instead.
        if stand and len(stand) == len(ids) and all(stand_in_structured[i] for i in stand):
            continue
        candidates.append(Fact(fact.text, ctx.ordered(real(ids))))
    return mapped, _merge_facts(ctx, candidates)


def _merge_facts(ctx: _Context, facts: Sequence[Fact]) -> list[Fact]:
    """One fact per wording (provenance merged), ordered by where it was said."""
    merged: dict[str, tuple[str, list[str]]] = {}
    for fact in facts:
        text = fact.text.strip()
        if not text:
            continue
        key = " ".join(words(text)) or text
        _, ids = merged.setdefault(key, (text, []))
        ids.extend(i for i in fact.source_event_ids if i not in ids)
    far = len(ctx.position)
    out = [Fact(text, ctx.ordered(ids)) for text, ids in merged.values()]
    order = {id(f): n for n, f in enumerate(out)}
    return sorted(
        out,
        key=lambda f: (
            min((ctx.position.get(i, far) for i in f.source_event_ids), default=far),
            order[id(f)],
        ),
    )


def _named_in(names: Iterable[str], text: str) -> tuple[str, ...]:
    """The ``names`` that ``text`` holds as whole words, case-insensitively ("Kiwi" is
    not named by "kiwis")."""
    return tuple(
        n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text, re.IGNORECASE)
    )


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        if isinstance(item, str) and item.strip():
            seen.setdefault(item.strip().casefold(), item.strip())
    return list(seen.values())


def _texts(items: Iterable[Any]) -> tuple[str, ...]:
    """Non-empty strings, once each (a stored summary may hold anything)."""
    return tuple(_unique(str(i) for i in items if isinstance(i, (str, int, float))))
