"""One session's graph evidence: the names, dates and relations its turns state.

    extract = extract_session(session, memories)    # pure: same session -> same extract

A pure function of the session and the memories distilled from it, so a batch job
can run it anywhere (a Ray Data map) and :class:`mnemoray.graph.UserGraph` merges the
results per user. Speakers are the authors of the conversation's messages; "I" in
what a speaker says is that speaker. Dates are resolved against the date each turn
was said (:func:`mnemoray.temporal.resolve_times`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mnemoray.graph.names import find_names, is_name_like
from mnemoray.graph.patterns import read_relations
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.temporal import resolve_times
from mnemoray.text import split_sentences

_TURN_ROLES = frozenset({"user", "model"})
# Authors who speak for the user without naming them: "I" is still someone.
USER_AUTHORS = frozenset({"user"})
# The word before a date (or that a date reading starts with: "since 2020").
_SINCE = re.compile(r"\b(?:since|from|starting|as of)\b", re.I)
_UNTIL = re.compile(r"\b(?:until|till|up to|through)\b", re.I)
# Abbreviations whose full stop is not a sentence end ("St. Mary's Hospital").
_ABBREVIATION = re.compile(r"\b(St|Mt|Ft|Dr|Mr|Mrs|Ms|Prof|Jr|Sr)\.\s")


@dataclass(frozen=True)
class Mention:
    """A surface form said in an event; dates carry their resolved period."""

    surface: str
    type: str  # person, place, org, thing, date, period
    event_id: str
    at: float  # when it was said
    speaker: bool = False
    initial_only: bool = False  # only ever seen at a sentence start: weak evidence
    start: float | None = None  # dates: the period it names
    end: float | None = None


@dataclass(frozen=True)
class Statement:
    """A typed relation a turn stated, with its world-time validity."""

    subject: str
    subject_type: str
    type: str
    obj: str
    obj_type: str
    confidence: float
    valid_from: float | None
    valid_to: float | None
    ended: bool  # the text said it no longer holds
    event_id: str
    at: float
    evidence: str


@dataclass(frozen=True)
class MemoryRef:
    memory_id: str
    text: str
    event_ids: tuple[str, ...]
    at: float | None


@dataclass(frozen=True)
class SessionExtract:
    app_name: str
    user_id: str
    session_id: str
    at: float  # when the session began (world time of its first turn)
    recorded_at: float
    mentions: tuple[Mention, ...]
    statements: tuple[Statement, ...]
    memories: tuple[MemoryRef, ...]
    speakers: tuple[str, ...]


def _turns(events: Iterable[Event]) -> list[Event]:
    return [
        e
        for e in events
        if e.type == "message" and e.role in _TURN_ROLES and not e.partial and e.text.strip()
    ]


def speaker_of(event: Event) -> str | None:
    """The person an event's "I" is: its author when a name or the user, else None."""
    if is_name_like(event.author) or (event.role == "user" and event.author in USER_AUTHORS):
        return event.author
    return None


def extract_session(
    session: Session, memories: Sequence[Memory] = (), *, recorded_at: float | None = None
) -> SessionExtract:
    """The graph evidence of ``session``: mentions, statements, and its memories."""
    turns = _turns(session.events)
    speakers = tuple(dict.fromkeys(s for s in (speaker_of(e) for e in turns) if s))
    mentions: list[Mention] = []
    statements: list[Statement] = []
    found: list[tuple[Event, str, str, bool]] = []  # (event, name, type, initial)
    for e in turns:
        who = speaker_of(e)
        if who is not None:
            mentions.append(Mention(who, "person", e.id, e.timestamp, speaker=True))
        for sentence in split_sentences(_ABBREVIATION.sub(r"\1 ", e.text)):
            for n in find_names(sentence):
                found.append((e, n.text, n.type, n.initial))
            for span in resolve_times(sentence, e.timestamp):
                kind = "date" if span.granularity == "day" else "period"
                mentions.append(
                    Mention(span.label, kind, e.id, e.timestamp, start=span.start, end=span.end)
                )
            statements.extend(_statements(sentence, e, who))
    # A capitalised word seen only at sentence starts is most likely not a name
    # ("Sounds", "Went"), unless a speaker or a relation names it.
    mid = {name for _, name, _, initial in found if not initial}
    named = set(speakers) | {s.subject for s in statements} | {s.obj for s in statements}
    for e, name, kind, initial in found:
        weak = initial and name not in mid and name not in named
        mentions.append(
            Mention(name, kind, e.id, e.timestamp, speaker=name in speakers, initial_only=weak)
        )
    for s in statements:  # objects read as nouns ("a puppy") are things too
        if s.obj and not s.obj[0].isupper() and s.obj_type == "thing":
            mentions.append(Mention(s.obj, "thing", s.event_id, s.at))
    refs = tuple(
        MemoryRef(m.memory_id, m.text, tuple(m.source_event_ids), m.event_time_start)
        for m in memories
        if m.session_id == session.session_id
    )
    start = min((e.timestamp for e in turns), default=session.created_at)
    return SessionExtract(
        session.app_name,
        session.user_id,
        session.session_id,
        start,
        time.time() if recorded_at is None else float(recorded_at),
        tuple(mentions),
        tuple(statements),
        refs,
        speakers,
    )


def _statements(sentence: str, event: Event, who: str | None) -> list[Statement]:
    readings = read_relations(sentence)
    if not readings:
        return []
    spans = resolve_times(sentence, event.timestamp)
    out: list[Statement] = []
    for r in readings:
        subject, obj = r.subject, r.obj
        if "I" in (subject, obj) and who is None:
            continue  # an agent's "I": not a person of the user's world
        if who is not None:  # else neither is "I" (skipped above)
            subject = who if subject == "I" else subject
            obj = who if obj == "I" else obj
        valid_from: float | None = None
        valid_to: float | None = None
        for s in spans:
            lead = sentence[max(0, s.begin - 12) : s.begin] + " " + s.text.split()[0]
            if _UNTIL.search(lead):
                valid_to = float(s.start)
            elif _SINCE.search(lead) or r.starts:
                valid_from = float(s.start) if valid_from is None else valid_from
            elif not r.ended:
                # A state said to hold ("my sister Lena"): a date beside it ("I'll make
                # it on Thursday for my sister Lena") dates something else said there.
                continue
            else:  # "I lived in Rome in 2019": held during that period
                valid_from, valid_to = float(s.start), float(s.end)
        if valid_from is None and not r.ended:
            valid_from = event.timestamp  # known to hold when it was said
        if r.ended and valid_to is None:
            valid_to = event.timestamp  # over by the time it was said
        out.append(
            Statement(
                subject,
                "person",
                r.type,
                obj,
                r.obj_type,
                r.confidence,
                valid_from,
                valid_to,
                r.ended,
                event.id,
                event.timestamp,
                sentence[:300],
            )
        )
    return out
