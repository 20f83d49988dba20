"""A user's profile, derived from their live memories in one store version.

    profile, topics = build_profile(snapshot, "app", "alice")

- expertise areas: the topics of the user's own turns (:mod:`mnemoray.profiles.terms`)
  named in at least :data:`MIN_MENTIONS` turns, with a depth (:func:`depth_of`) and
  the ids of the memories that hold those turns (evidence, newest first);
- communication style and declined topics (:mod:`mnemoray.profiles.style`);
- the people, places and things the user's live memories mention (the entity graph,
  where the store keeps one and its shard reads), counted by those memories only;
- memories (by kind) and sessions counted, first and last active (world time).

A declined topic is left out of the expertise areas and of what the user gives the
app's domain index (``UserTopics``). Nothing here reads another user's rows, nor an
agent's own (agent-only) memories: a profile is what every agent of the app may see.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from mnemoray.graph.model import MENTIONS
from mnemoray.memory.recall.inputs import user_graph
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.profiles.style import CommunicationStyle, DeclinedTopic, gives_specifics, read_style
from mnemoray.profiles.terms import language_of, topic_terms
from mnemoray.profiles.turns import read_turns
from mnemoray.sessions.events import iso

MIN_MENTIONS = 2  # a word said once is no area of expertise
MAX_AREAS = 12
MAX_ENTITIES = 12
EVIDENCE = 5  # memory ids kept per area
# Depth: how many sessions came back to a topic, and whether the user gave specifics
# (numbers, names) about it: an expert provides precise dates and names.
EXPERT_SESSIONS, EXPERT_SPECIFIC = 3, 2
MODERATE_SESSIONS, MODERATE_MENTIONS = 2, 3
DEPTHS = ("surface", "moderate", "expert")


def depth_of(sessions: int, mentions: int, specific: int) -> str:
    if sessions >= EXPERT_SESSIONS and specific >= EXPERT_SPECIFIC:
        return "expert"
    if sessions >= MODERATE_SESSIONS or mentions >= MODERATE_MENTIONS:
        return "moderate"
    return "surface"


@dataclass(frozen=True)
class ExpertiseArea:
    topic: str  # the word the user used most for it
    term: str  # the keyword index's term
    depth: str  # "surface" | "moderate" | "expert"
    mentions: int  # the user's turns naming it
    sessions: int
    specific: int  # of those turns, the ones giving a number or a name
    evidence: list[str]  # memory ids holding those turns, newest first


@dataclass
class TermCount:
    """One topic term of one user (what the domain index adds up)."""

    mentions: int = 0
    specific: int = 0
    sessions: set[str] = field(default_factory=set)
    months: set[str] = field(default_factory=set)
    words: Counter[str] = field(default_factory=Counter)
    evidence: set[str] = field(default_factory=set)  # memory ids


@dataclass(frozen=True)
class UserTopics:
    """What one user gives the app's domain index: counts, never text."""

    memories: int
    sessions: int
    terms: dict[str, TermCount]
    months: dict[str, tuple[int, frozenset[str]]]  # YYYY-MM -> (memories, session ids)
    # Years (or decades, "1990s") the memories talk about: the graph's date and period
    # entities, by the memories mentioning them (empty where no graph is kept).
    mentioned: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class UserProfile:
    app_name: str
    user_id: str
    store_version: int
    memories: int
    memory_kinds: dict[str, int]
    sessions: int
    first_active: float | None  # world time of the earliest / latest memory (epoch s)
    last_active: float | None
    expertise: list[ExpertiseArea]
    style: CommunicationStyle
    declined: list[DeclinedTopic]
    entities: list[dict[str, Any]]  # {"name", "type", "memories"}, most mentioned first

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _start(m: Memory) -> float:
    return m.event_time_start if m.event_time_start is not None else m.created_at


def _end(m: Memory) -> float:
    return m.event_time_end if m.event_time_end is not None else m.created_at


def era_of(label: str) -> str | None:
    """The year ("2023") or decade ("1990s") of a date or period entity's label
    (mnemoray.temporal: "2023-05-07", "2023-W18", "2023-summer", "1990s", ...)."""
    head = label[:4]
    if not head.isdigit():
        return None
    return label[:5] if label[4:5] == "s" else head


def _entities(
    snap: StoreSnapshot,
    app: str,
    user: str,
    live: set[str],
) -> tuple[list[dict[str, Any]], set[str], dict[str, int]]:
    """Entities mentioned by live memories (most first); the lower-cased words of
    people's names (no topic: a person is an entity, not an area); and per year or
    decade the memories mentioning a date or period of it."""
    # Recall's rule: no graph to ask (a store that keeps none, a damaged graph shard)
    # means no entities, not a failed profile: one damaged shard must not fail every
    # profile it holds and the whole app's domain index.
    graph = user_graph(snap, app, user)
    if graph is None:
        return [], set(), {}
    counts: Counter[str] = Counter()
    eras: dict[str, set[str]] = {}
    for r in graph.relations.values():
        if r.type == MENTIONS and r.src in live and r.dst in graph.entities:
            counts[r.dst] += 1
            e = graph.entities[r.dst]
            era = era_of(e.name) if e.type in ("date", "period") else None
            if era is not None:
                eras.setdefault(era, set()).add(r.src)
    names: set[str] = set()
    for e in graph.entities.values():
        if e.type == "person":
            names.update(w.lower() for w in e.name.split())
    for a in graph.aliases.values():
        if a.entity_id in graph.entities and graph.entities[a.entity_id].type == "person":
            names.update(w.lower() for w in a.alias.split())
    shown = [
        graph.entities[i]
        for i in counts
        if not graph.entities[i].speaker and graph.entities[i].type not in ("date", "period")
    ]
    shown.sort(key=lambda e: (-counts[e.entity_id], e.name))
    return (
        [
            {"name": e.name, "type": e.type, "memories": counts[e.entity_id]}
            for e in shown[:MAX_ENTITIES]
        ],
        names,
        {era: len(ids) for era, ids in sorted(eras.items())},
    )


def shared_rows(snap: StoreSnapshot, app: str, user: str) -> list[Memory]:
    """The user's live memories every agent of the app sees: what a recall without an
    agent reads (docs/scopes.md); an agent's own memories stay in its own recall."""
    return [m for m in snap.rows_for_user(app, user) if not m.agent_name]


def build_profile(
    snap: StoreSnapshot,
    app: str,
    user: str,
    memories: list[Memory] | None = None,
) -> tuple[UserProfile, UserTopics, float]:
    """The profile of (app, user) in ``snap``, what the user gives the domain index,
    and when it stops holding (the first expiry among the memories read; inf: never).
    ``memories``: the user's shared live memories (:func:`shared_rows`), when the
    caller read them."""
    memories = shared_rows(snap, app, user) if memories is None else memories
    live = {m.memory_id for m in memories}
    entities, people, mentioned = _entities(snap, app, user, live)
    sessions = read_turns(memories)
    speakers = {t.speaker.lower() for ts in sessions.values() for t in ts if t.speaker}
    style, declined = read_style(list(sessions.values()))
    language = language_of(t.text for ts in sessions.values() for t in ts if t.mine)
    refused = {w for d in declined for w in topic_terms(d.topic, language=language)}
    exclude = people | {w for s in speakers for w in s.split()}
    when = {m.memory_id: _start(m) for m in memories}
    terms: dict[str, TermCount] = {}
    for turns in sessions.values():
        for t in turns:
            if not t.mine:
                continue
            specific = gives_specifics(t.text)
            for term, word in topic_terms(t.text, exclude, language).items():
                if term in refused:
                    continue
                c = terms.setdefault(term, TermCount())
                c.mentions += 1
                c.specific += specific
                c.sessions.add(t.session_id)
                c.months.add(t.day[:7])
                c.words[word] += 1
                c.evidence.update(t.memory_ids)
    areas = []
    for term, c in terms.items():
        if c.mentions < MIN_MENTIONS:
            continue
        ids = sorted(c.evidence, key=lambda i: (-when[i], i))
        areas.append(
            ExpertiseArea(
                c.words.most_common(1)[0][0],
                term,
                depth_of(len(c.sessions), c.mentions, c.specific),
                c.mentions,
                len(c.sessions),
                c.specific,
                ids[:EVIDENCE],
            )
        )
    areas.sort(key=lambda a: (-DEPTHS.index(a.depth), -a.sessions, -a.mentions, a.term))
    months: dict[str, tuple[int, set[str]]] = {}
    for m in memories:
        month = iso(_start(m))[:7]
        n, sids = months.get(month, (0, set()))
        sids.add(m.session_id)
        months[month] = (n + 1, sids)
    session_ids = {m.session_id for m in memories}
    profile = UserProfile(
        app,
        user,
        snap.version,
        len(memories),
        dict(Counter(m.kind for m in memories)),
        len(session_ids),
        min((_start(m) for m in memories), default=None),
        max((_end(m) for m in memories), default=None),
        areas[:MAX_AREAS],
        style,
        declined,
        entities,
    )
    topics = UserTopics(
        len(memories),
        len(session_ids),
        terms,
        {k: (n, frozenset(s)) for k, (n, s) in sorted(months.items())},
        mentioned,
    )
    expires = min((m.expires_at for m in memories if m.expires_at is not None), default=math.inf)
    return profile, topics, expires


__all__ = [
    "DEPTHS",
    "ExpertiseArea",
    "TermCount",
    "UserProfile",
    "UserTopics",
    "build_profile",
    "depth_of",
    "era_of",
    "shared_rows",
]
