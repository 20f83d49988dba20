"""Knowledge updates: a newer functional fact closes the older one; nothing is deleted.

For each subject and functional relation type (``lives_in``, ``works_at``, ...), facts
are ordered by when they began to hold; one that is still open is closed when a later
one with another object begins (``valid_to`` = the newer ``valid_from``, ``ended_by`` =
its id). A fact the text itself ended ("used to live in") keeps its own end. Closing
is recomputed from the facts each time, so forgetting the newer fact reopens the older.

Memory-to-memory relations follow from the facts: the memories of a newer fact
``contradicts`` those of the fact it closed, and a later session's memories restating
a fact ``extends`` the first session's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from mnemoray.graph.model import (
    CONTRADICTS,
    DERIVED,
    EXTENDS,
    FUNCTIONAL,
    Relation,
    Support,
    stable_id,
)

STATED = "stated"
_PER_SIDE = 3  # memories linked per side of a derived relation


def _start(r: Relation) -> float:
    return r.valid_from if r.valid_from is not None else float("-inf")


def close_superseded(relations: dict[str, Relation]) -> None:
    """Recompute which functional facts closed which, in place (versions bumped)."""
    groups: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    for r in relations.values():
        if r.type in FUNCTIONAL and r.ended_by != STATED:
            groups[(r.src, r.type)].append(r)
    for facts in groups.values():
        facts.sort(key=lambda r: (_start(r), r.recorded_at, r.relation_id))
        for i, r in enumerate(facts):
            newer = next((n for n in facts[i + 1:]
                          if n.dst != r.dst and _start(n) >= _start(r)), None)
            valid_to = newer.valid_from if newer is not None else None
            ended_by = newer.relation_id if newer is not None else ""
            if (valid_to, ended_by) != (r.valid_to, r.ended_by):
                why = f"superseded_by:{ended_by}" if ended_by else "reopened"
                relations[r.relation_id] = r.bumped(why, valid_to=valid_to, ended_by=ended_by)


def derive(relations: dict[str, Relation], app_name: str, user_id: str) -> None:
    """Replace the derived memory relations (``contradicts``, ``extends``), in place."""
    for rid in [rid for rid, r in relations.items() if r.type in DERIVED]:
        del relations[rid]
    made: list[Relation] = []
    for old in list(relations.values()):
        newer = relations.get(old.ended_by) if old.ended_by not in ("", STATED) else None
        if newer is not None:
            made.extend(_pairs(CONTRADICTS, newer, newer.supports, old.supports,
                               min(old.confidence, newer.confidence), app_name, user_id))
        if old.type not in DERIVED and old.src_kind == "entity" and len(old.supports) > 1:
            first, later = old.supports[0], old.supports[1:]
            made.extend(_pairs(EXTENDS, old, later, (first,), old.confidence, app_name,
                               user_id))
    for r in made:
        relations.setdefault(r.relation_id, r)


def _pairs(rtype: str, fact: Relation, newer: Iterable[Support], older: Iterable[Support],
           confidence: float, app_name: str, user_id: str) -> list[Relation]:
    news = [(s, m) for s in newer for m in s.memory_ids[:_PER_SIDE]]
    olds = [(s, m) for s in older for m in s.memory_ids[:_PER_SIDE]]
    out = []
    for s_new, m_new in news[:_PER_SIDE]:
        for s_old, m_old in olds[:_PER_SIDE]:
            if m_new == m_old:
                continue
            supports = (Support(s_new.session_id, s_new.event_ids, (m_new,)),
                        Support(s_old.session_id, s_old.event_ids, (m_old,)))
            if s_new.session_id == s_old.session_id:
                supports = (supports[0].merged(supports[1]),)
            out.append(Relation(
                stable_id("rel", app_name, user_id, m_new, rtype, m_old), app_name, user_id,
                m_new, "memory", rtype, m_old, "memory", strength=fact.strength,
                confidence=confidence, recorded_at=fact.recorded_at, supports=supports,
                evidence=fact.evidence, changed_by=f"derived:{fact.relation_id}"))
    return out


def as_of(relations: Iterable[Relation], t: float) -> list[Relation]:
    """The relations that held at world time ``t``."""
    return [r for r in relations if r.valid_at(t)]


def history(relations: Iterable[Relation], src: str, rtype: str) -> list[Relation]:
    """A subject's facts of one type, oldest first: where someone lived, in order."""
    return sorted((r for r in relations if r.src == src and r.type == rtype),
                  key=lambda r: (_start(r), r.recorded_at, r.relation_id))


def superseded(relations: dict[str, Relation], relation_id: str) -> list[Relation]:
    """The facts ``relation_id`` closed: "where did I live before Berlin?"."""
    return [r for r in relations.values() if r.ended_by == relation_id]

