"""Knowledge updates: a newer functional fact closes the older one; nothing is deleted.

For each subject and functional relation type (``lives_in``, ``works_at``, ...), facts
are ordered by when they began to hold; one that is still open is closed when a later
one with another object begins (``valid_to`` = the newer ``valid_from``, ``ended_by`` =
its id). A fact the text itself ended ("used to live in") keeps its own end. Closing
is recomputed from the facts each time, so forgetting the newer fact reopens the older.

Memory-to-memory relations follow from the facts: the memories of a newer fact
``contradicts`` those of the fact it closed, and a later session's memories restating
a fact ``extends`` the first session's.

Both passes are run after every session merged into a user's graph. On a plain dict
they recompute everything; on a :class:`~mnemoray.graph.relations.Relations` (a
graph's, past its first few sessions) they redo only what changed since the last pass and what that
can affect (the facts of a (subject, type) a change touched; the derived relations of a
changed fact or of the fact that closed it), with the same result: a full pass over the
history per session made merging a long-lived user's sessions quadratic.
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
from mnemoray.graph.relations import STATED, Relations

_PER_SIDE = 3  # memories linked per side of a derived relation


def _start(r: Relation) -> float:
    return r.valid_from if r.valid_from is not None else float("-inf")


def close_superseded(relations: dict[str, Relation]) -> None:
    """Recompute which functional facts closed which, in place (versions bumped)."""
    if isinstance(relations, Relations):
        relations.index()  # each group in the dict's order, as a full pass finds it
        groups = [
            [
                relations[rid]
                for rid in relations.in_order(relations.groups.get(key, ()))
                if relations[rid].ended_by != STATED
            ]
            for key in relations.dirty_groups
        ]
    else:
        by_key: dict[tuple[str, str], list[Relation]] = defaultdict(list)
        for r in relations.values():
            if r.type in FUNCTIONAL and r.ended_by != STATED:
                by_key[(r.src, r.type)].append(r)
        groups = list(by_key.values())
    for facts in groups:  # each group's outcome depends on its own facts only
        facts.sort(key=lambda r: (_start(r), r.recorded_at, r.relation_id))
        for i, r in enumerate(facts):
            newer = next(
                (n for n in facts[i + 1 :] if n.dst != r.dst and _start(n) >= _start(r)), None
            )
            valid_to = newer.valid_from if newer is not None else None
            ended_by = newer.relation_id if newer is not None else ""
            if (valid_to, ended_by) != (r.valid_to, r.ended_by):
                why = f"superseded_by:{ended_by}" if ended_by else "reopened"
                relations[r.relation_id] = r.bumped(why, valid_to=valid_to, ended_by=ended_by)
    if isinstance(relations, Relations):
        relations.dirty_groups.clear()  # what it bumped changes no group


def derive(relations: dict[str, Relation], app_name: str, user_id: str) -> None:
    """Replace the derived memory relations (``contradicts``, ``extends``), in place: after
    the other relations, in their order, each fact's (first id kept)."""
    if isinstance(relations, Relations):
        _derive_changed(relations.index(), app_name, user_id)
        return
    for rid in [rid for rid, r in relations.items() if r.type in DERIVED]:
        del relations[rid]
    made: list[Relation] = []
    for old in list(relations.values()):
        if old.ended_by not in ("", STATED) or (old.src_kind == "entity" and len(old.supports) > 1):
            made.extend(_made_by(relations, old, app_name, user_id))  # else it makes none
    for r in made:
        relations.setdefault(r.relation_id, r)


def _derive_changed(relations: Relations, app_name: str, user_id: str) -> None:
    """``derive``, redoing the relations of the facts changed since the last pass."""
    made = relations.made
    if relations.made_for != (app_name, user_id):
        made.clear()
        relations.dirty_facts.update(rid for rid, r in relations.items() if r.type not in DERIVED)
        relations.made_for = (app_name, user_id)
    for rid in relations.dirty_facts:
        r = dict.get(relations, rid)
        found = (
            _made_by(relations, r, app_name, user_id)
            if r is not None and r.type not in DERIVED
            else None
        )
        if found:
            made[rid] = found
        else:
            made.pop(rid, None)
    relations.dirty_facts.clear()
    relations.move_derived(d for rid in relations.in_order(made) for d in made[rid])


def _made_by(
    relations: dict[str, Relation], old: Relation, app_name: str, user_id: str
) -> list[Relation]:
    """The derived relations of one (non-derived) relation: ``contradicts`` from the
    memories of the fact that closed it, ``extends`` from its later sessions' memories."""
    made: list[Relation] = []
    newer = relations.get(old.ended_by) if old.ended_by not in ("", STATED) else None
    if newer is not None and newer.type not in DERIVED:  # derived: gone in a full pass
        made.extend(
            _pairs(
                CONTRADICTS,
                newer,
                newer.supports,
                old.supports,
                min(old.confidence, newer.confidence),
                app_name,
                user_id,
            )
        )
    if old.type not in DERIVED and old.src_kind == "entity" and len(old.supports) > 1:
        first, later = old.supports[0], old.supports[1:]
        made.extend(_pairs(EXTENDS, old, later, (first,), old.confidence, app_name, user_id))
    return made


def _pairs(
    rtype: str,
    fact: Relation,
    newer: Iterable[Support],
    older: Iterable[Support],
    confidence: float,
    app_name: str,
    user_id: str,
) -> list[Relation]:
    news = [(s, m) for s in newer for m in s.memory_ids[:_PER_SIDE]]
    olds = [(s, m) for s in older for m in s.memory_ids[:_PER_SIDE]]
    out = []
    for s_new, m_new in news[:_PER_SIDE]:
        for s_old, m_old in olds[:_PER_SIDE]:
            if m_new == m_old:
                continue
            supports: tuple[Support, ...] = (
                Support(s_new.session_id, s_new.event_ids, (m_new,)),
                Support(s_old.session_id, s_old.event_ids, (m_old,)),
            )
            if s_new.session_id == s_old.session_id:
                supports = (supports[0].merged(supports[1]),)
            out.append(
                Relation(
                    stable_id("rel", app_name, user_id, m_new, rtype, m_old),
                    app_name,
                    user_id,
                    m_new,
                    "memory",
                    rtype,
                    m_old,
                    "memory",
                    strength=fact.strength,
                    confidence=confidence,
                    recorded_at=fact.recorded_at,
                    supports=supports,
                    evidence=fact.evidence,
                    changed_by=f"derived:{fact.relation_id}",
                )
            )
    return out


def as_of(relations: Iterable[Relation], t: float) -> list[Relation]:
    """The relations that held at world time ``t``."""
    return [r for r in relations if r.valid_at(t)]


def history(relations: Iterable[Relation], src: str, rtype: str) -> list[Relation]:
    """A subject's facts of one type, oldest first: where someone lived, in order."""
    return sorted(
        (r for r in relations if r.src == src and r.type == rtype),
        key=lambda r: (_start(r), r.recorded_at, r.relation_id),
    )


def superseded(relations: dict[str, Relation], relation_id: str) -> list[Relation]:
    """The facts ``relation_id`` closed: "where did I live before Berlin?"."""
    return [r for r in relations.values() if r.ended_by == relation_id]
