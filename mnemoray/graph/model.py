"""The graph's records: entities, their aliases, and relations with world-time validity.

A relation joins two nodes: entities (``ent-...`` ids) or memories (their memory ids).
Every record says where it came from (``supports``: the sessions, events and memories
that stated it), when it was recorded, and its version: what last changed it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Literal

EntityType = Literal["person", "place", "org", "thing", "date", "period"]
ENTITY_TYPES: tuple[str, ...] = ("person", "place", "org", "thing", "date", "period")
NodeKind = Literal["entity", "memory"]

# Relations between memories and entities, or between memories.
MENTIONS = "mentions"
SAME_ENTITY = "same_entity"
EXTENDS = "extends"
CONTRADICTS = "contradicts"
SAME_PERIOD = "same_period"
STRUCTURAL = (MENTIONS, SAME_ENTITY, EXTENDS, CONTRADICTS, SAME_PERIOD)
# Relations read from text (mnemoray.graph.patterns).
TYPED = (
    "lives_in",
    "works_at",
    "owns",
    "adopted",
    "married_to",
    "sister_of",
    "brother_of",
    "mother_of",
    "father_of",
    "daughter_of",
    "son_of",
    "friend_of",
    "partner_of",
    "grew_up_in",
    "visited",
    "enjoys",
)
RELATION_TYPES: tuple[str, ...] = STRUCTURAL + TYPED
# A subject holds one of these at a time: a newer one closes the older one's validity.
FUNCTIONAL = frozenset({"lives_in", "works_at", "married_to", "partner_of"})
# Relations derived from the others on every rebuild (never merged, never versioned).
DERIVED = frozenset({EXTENDS, CONTRADICTS})


def stable_id(prefix: str, *parts: str) -> str:
    h = hashlib.blake2b(digest_size=10)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return f"{prefix}-{h.hexdigest()}"


def alias_key(surface: str) -> str:
    """How a surface form is compared: case-folded, spaces collapsed, no "the"/possessive."""
    key = " ".join(surface.casefold().replace("\u2019", "'").split())
    if key.startswith("the "):
        key = key[4:]
    return key[:-2] if key.endswith("'s") else key


@dataclass(frozen=True)
class Support:
    """One session's evidence for a record: the events that said it, the memories
    distilled from them and, for a fact, the validity that session gave it (so
    forgetting the session takes its dating away too)."""

    session_id: str
    event_ids: tuple[str, ...] = ()
    memory_ids: tuple[str, ...] = ()
    valid_from: float | None = None
    valid_to: float | None = None
    ended: bool = False  # the session said the fact no longer holds

    def merged(self, other: Support) -> Support:
        starts = [t for t in (self.valid_from, other.valid_from) if t is not None]
        ends = [t for t in (self.valid_to, other.valid_to) if t is not None]
        return Support(
            self.session_id,
            tuple(dict.fromkeys((*self.event_ids, *other.event_ids))),
            tuple(dict.fromkeys((*self.memory_ids, *other.memory_ids))),
            min(starts) if starts else None,
            max(ends) if ends else None,
            self.ended or other.ended,
        )


def stated_validity(supports: tuple[Support, ...]) -> tuple[float | None, float | None, bool]:
    """A fact's validity from its evidence: it began at the earliest start any session
    gave; it ended when a session said so (the latest such end)."""
    starts = [s.valid_from for s in supports if s.valid_from is not None]
    ends = [s.valid_to for s in supports if s.ended and s.valid_to is not None]
    ended = any(s.ended for s in supports)
    return (min(starts) if starts else None, max(ends) if ends else None, ended)


def merge_supports(*groups: tuple[Support, ...]) -> tuple[Support, ...]:
    by_session: dict[str, Support] = {}
    for group in groups:
        for s in group:
            by_session[s.session_id] = (
                by_session[s.session_id].merged(s) if s.session_id in by_session else s
            )
    return tuple(by_session.values())


@dataclass(frozen=True)
class Entity:
    entity_id: str
    app_name: str
    user_id: str
    name: str  # the fullest form seen ("Melanie", not "Mel")
    type: str
    confidence: float = 1.0
    first_seen: float | None = None  # world time of the first and last mention
    last_seen: float | None = None
    mention_count: int = 0
    speaker: bool = False  # authored events: a participant of the conversations
    supports: tuple[Support, ...] = ()
    recorded_at: float = 0.0
    version: int = 1
    changed_by: str = ""  # e.g. "session:s1", "alias:Mel", "forget:s1"

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(s.session_id for s in self.supports)


@dataclass(frozen=True)
class Alias:
    """A surface form of an entity, with the rule that tied it and how sure it is."""

    entity_id: str
    alias: str
    key: str
    rule: str  # "name", "exact", "first_name", "prefix", "nickname", "speaker"
    confidence: float
    session_ids: tuple[str, ...] = ()
    recorded_at: float = 0.0


@dataclass(frozen=True)
class Relation:
    relation_id: str
    app_name: str
    user_id: str
    src: str
    src_kind: NodeKind
    type: str
    dst: str
    dst_kind: NodeKind
    strength: float = 1.0  # how much evidence: grows with independent statements
    confidence: float = 1.0  # how sure the reading is (pattern, resolution)
    valid_from: float | None = None  # world time it began to hold (None: unknown)
    valid_to: float | None = None  # world time it stopped holding (None: still holds)
    ended_by: str = ""  # "" open, "stated" (text said it ended), or the superseding id
    recorded_at: float = 0.0
    supports: tuple[Support, ...] = ()
    evidence: str = ""  # the sentence it was read from (typed relations)
    version: int = 1
    changed_by: str = ""

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(s.session_id for s in self.supports)

    @property
    def source_event_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e for s in self.supports for e in s.event_ids))

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m for s in self.supports for m in s.memory_ids))

    def valid_at(self, t: float) -> bool:
        """Held at world time ``t``: began at or before it (or unknown), not yet ended."""
        return (self.valid_from is None or self.valid_from <= t) and (
            self.valid_to is None or t < self.valid_to
        )

    def bumped(self, changed_by: str, **changes: object) -> Relation:
        return replace(self, version=self.version + 1, changed_by=changed_by, **changes)  # type: ignore[arg-type]


def strength_of(statements: int) -> float:
    """Evidence from independent statements: 0.5, 0.75, 0.875, ... toward 1."""
    return round(1.0 - 0.5 ** max(statements, 1), 6)
