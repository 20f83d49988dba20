"""One user's entity graph: sessions merged in, forgotten, and asked about.

    graph = UserGraph("app", "u1")
    for session in sessions_in_time_order:
        graph.add_session(extract_session(session, memories_of[session.session_id]))
    mel = graph.find("Mel")                       # the entity Melanie, alias Mel
    graph.facts(mel.entity_id)                    # what holds now
    graph.facts(mel.entity_id, at=ts_2022)        # what held then
    graph.forget_session("s3")                    # what s3 alone said is gone

Adding a session again replaces what it said before (sessions grow). Adding sessions
in time order keeps resolution deterministic (docs/graph.md, "Resolution").
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.graph.extract import Mention, SessionExtract, Statement
from mnemoray.graph.model import (
    MENTIONS,
    SAME_ENTITY,
    SAME_PERIOD,
    TYPED,
    Alias,
    Entity,
    Relation,
    Support,
    alias_key,
    merge_supports,
    stable_id,
    stated_validity,
    strength_of,
)
from mnemoray.graph.relations import STATED, Relations, matching
from mnemoray.graph.resolve import AliasIndex
from mnemoray.graph.validity import close_superseded, derive, history, superseded
from mnemoray.temporal.periods import month, to_date

_DATES = frozenset({"date", "period"})


def _evidence(supports: tuple[Support, ...]) -> dict[str, Any]:
    """A fact's strength and stated validity from the sessions that support it."""
    valid_from, valid_to, ended = stated_validity(supports)
    return {
        "strength": strength_of(sum(len(s.event_ids) for s in supports)),
        "valid_from": valid_from,
        "valid_to": valid_to if ended else None,
        "ended_by": STATED if ended else "",
    }


_SPECIFIC = ("person", "org", "place")
# A graph's relations log their changes, so that the validity passes redo only what a
# session changed (mnemoray.graph.relations), once FULL_PASSES sessions were merged into
# the object and it holds INDEXED_RELATIONS: building the indexes costs about as much as
# that many full passes, and below that size a full pass costs no more than the logging.
FULL_PASSES = 20
INDEXED_RELATIONS = 1000


class UserGraph:
    """Entities, aliases and relations of one (app, user), keyed by id."""

    def __init__(
        self,
        app_name: str,
        user_id: str,
        entities: Iterable[Entity] = (),
        aliases: Iterable[Alias] = (),
        relations: Iterable[Relation] = (),
    ) -> None:
        self.app_name, self.user_id = app_name, user_id
        self.entities = {e.entity_id: e for e in entities}
        self.aliases = {(a.entity_id, a.key): a for a in aliases}
        self.relations = {r.relation_id: r for r in relations}
        # Entity id -> type, built on the first find() after a change: recall asks once
        # per unknown name in a question, and rebuilding it each time cost a pass over
        # every entity. Only add_session and _drop change entities (both reset it).
        self._types: dict[str, str] | None = None
        # The sessions anything holds evidence of, built on the first add_session and kept
        # by add_session and _drop (the only changes): rebuilding it for every session
        # added was a pass over the whole graph, quadratic in a user's sessions.
        self._held: set[str] | None = None
        self._merged = 0  # sessions merged into this object (FULL_PASSES)
        self._reindex()

    def _reindex(self) -> None:
        self._types = None
        self._index = AliasIndex()
        for a in sorted(self.aliases.values(), key=lambda a: (a.recorded_at, a.key)):
            e = self.entities.get(a.entity_id)
            if e is not None:
                self._index.add(a.entity_id, a.key, e.type in ("person", "thing"))

    def sessions(self) -> set[str]:
        return {s for r in self.entities.values() for s in r.session_ids} | {
            s for r in self.relations.values() for s in r.session_ids
        }

    # -- adding a session -------------------------------------------------------------
    def add_session(self, ex: SessionExtract) -> None:
        """Merge one session's evidence: resolve its names, add its facts and memory
        relations, then recompute which facts closed which."""
        if (ex.app_name, ex.user_id) != (self.app_name, self.user_id):
            raise InvalidInput(
                f"session of {ex.app_name}/{ex.user_id} added to the graph "
                f"of {self.app_name}/{self.user_id}",
                field="session",
            )
        try:
            self._merge(ex)
        except BaseException:
            self._held = None  # rebuilt from the graph next time: this one may be half-changed
            raise

    def _merge(self, ex: SessionExtract) -> None:
        if self._held is None:
            self._held = self.sessions()
        if ex.session_id in self._held:
            self._drop(ex.session_id)
        self._types = None  # entities change below (reset first: also if this raises)
        types = {eid: e.type for eid, e in self.entities.items()}
        keep = [
            m
            for m in ex.mentions
            if not m.initial_only or alias_key(m.surface) in self._index.exact
        ]
        keep.sort(key=lambda m: (not m.speaker, -len(m.surface)))
        keys = {alias_key(m.surface) for m in keep if m.type not in _DATES}
        found: dict[tuple[str, bool], str] = {}  # (alias key, is a date) -> entity id
        touched: set[str] = set()
        for m in keep:
            eid = self._resolve(ex, m, keys, types, found)
            touched.add(eid)
        for st in ex.statements:
            self._state(ex, st, found, types, touched)
        self._memories(ex, keep, found, types, touched)
        if touched:  # each touched entity holds a support of this session (none: nothing does)
            self._held.add(ex.session_id)
        for eid in touched:  # a new entity is version 1; each later session adds one
            e = self.entities[eid]
            self.entities[eid] = replace(
                e, version=e.version + bool(e.changed_by), changed_by=f"session:{ex.session_id}"
            )
        self._merged += 1
        if (
            self._merged > FULL_PASSES
            and len(self.relations) >= INDEXED_RELATIONS
            and not isinstance(self.relations, Relations)
        ):
            self.relations = Relations(self.relations)  # each change logged from now on
        close_superseded(self.relations)
        derive(self.relations, self.app_name, self.user_id)

    def _resolve(
        self,
        ex: SessionExtract,
        m: Mention,
        keys: set[str],
        types: dict[str, str],
        found: dict[tuple[str, bool], str],
    ) -> str:
        key, is_date = alias_key(m.surface), m.type in _DATES
        support = Support(ex.session_id, (m.event_id,))
        eid = found.get((key, is_date))
        if eid is None:
            match = self._index.match(m.surface, m.type, keys, types)
            eid = match.entity_id
            if eid is None:
                eid = stable_id(
                    "ent", self.app_name, self.user_id, ("date:" if is_date else "") + key
                )
                self.entities[eid] = Entity(
                    eid, self.app_name, self.user_id, m.surface, m.type, recorded_at=ex.recorded_at
                )
                for other, confidence in match.links:
                    self._link(ex, eid, other, confidence, support)
            elif match.rule != "exact" and len(m.surface) > len(self.entities[eid].name):
                self.entities[eid] = replace(self.entities[eid], name=m.surface)
            found[(key, is_date)] = eid
            types[eid] = self.entities[eid].type
            old = self.aliases.get((eid, key)) or Alias(
                eid,
                m.surface,
                key,
                "name" if match.entity_id is None else match.rule,
                match.confidence,
                (),
                ex.recorded_at,
            )
            self.aliases[(eid, key)] = replace(
                old, session_ids=tuple(dict.fromkeys((*old.session_ids, ex.session_id)))
            )
            self._index.add(eid, key, types[eid] in ("person", "thing"))
        e = self.entities[eid]
        kind = "person" if m.speaker else m.type
        if e.type == "thing" and kind in _SPECIFIC:
            types[eid] = kind
        seen = [t for t in (e.first_seen, e.last_seen, m.at) if t is not None]
        self.entities[eid] = replace(
            e,
            type=types[eid],
            speaker=e.speaker or m.speaker,
            mention_count=e.mention_count + 1,
            first_seen=min(seen),
            last_seen=max(seen),
            supports=merge_supports(e.supports, (support,)),
        )
        return eid

    def _link(
        self, ex: SessionExtract, eid: str, other: str, confidence: float, support: Support
    ) -> None:
        rid = stable_id("rel", self.app_name, self.user_id, eid, SAME_ENTITY, other)
        self.relations[rid] = Relation(
            rid,
            self.app_name,
            self.user_id,
            eid,
            "entity",
            SAME_ENTITY,
            other,
            "entity",
            strength=confidence,
            confidence=confidence,
            recorded_at=ex.recorded_at,
            supports=(support,),
            changed_by=f"session:{ex.session_id}",
        )

    def _entity_for(
        self,
        ex: SessionExtract,
        surface: str,
        kind: str,
        event_id: str,
        at: float,
        types: dict[str, str],
        found: dict[tuple[str, bool], str],
    ) -> str:
        eid = found.get((alias_key(surface), False))
        if eid is None:
            eid = self._resolve(ex, Mention(surface, kind, event_id, at), set(), types, found)
        if kind in _SPECIFIC and self.entities[eid].type == "thing":
            types[eid] = kind
            self.entities[eid] = replace(self.entities[eid], type=kind)
        return eid

    def _state(
        self,
        ex: SessionExtract,
        st: Statement,
        found: dict[tuple[str, bool], str],
        types: dict[str, str],
        touched: set[str],
    ) -> None:
        src = self._entity_for(ex, st.subject, "person", st.event_id, st.at, types, found)
        dst = self._entity_for(ex, st.obj, st.obj_type, st.event_id, st.at, types, found)
        touched.update((src, dst))
        memories = tuple(m.memory_id for m in ex.memories if st.event_id in m.event_ids)
        support = Support(
            ex.session_id, (st.event_id,), memories, st.valid_from, st.valid_to, st.ended
        )
        same = matching(self.relations, src, st.type, dst)
        for r in sorted(same, key=lambda r: r.valid_from or 0.0, reverse=True):
            if st.valid_from is not None and r.valid_to is not None and st.valid_from >= r.valid_to:
                break  # it held again after it ended: a new fact ("moved back to Berlin")
            supports = merge_supports(r.supports, (support,))
            self.relations[r.relation_id] = r.bumped(
                f"session:{ex.session_id}",
                supports=supports,
                confidence=max(r.confidence, st.confidence),
                **_evidence(supports),
            )
            return
        rid = stable_id("rel", self.app_name, self.user_id, src, st.type, dst, repr(st.valid_from))
        self.relations[rid] = Relation(
            rid,
            self.app_name,
            self.user_id,
            src,
            "entity",
            st.type,
            dst,
            "entity",
            confidence=st.confidence,
            recorded_at=ex.recorded_at,
            supports=(support,),
            evidence=st.evidence,
            changed_by=f"session:{ex.session_id}",
            **_evidence((support,)),
        )

    def _memories(
        self,
        ex: SessionExtract,
        mentions: list[Mention],
        found: dict[tuple[str, bool], str],
        types: dict[str, str],
        touched: set[str],
    ) -> None:
        """``mentions`` from each memory to the entities its text names (dates: said in
        its events), and ``same_period`` to the month it happened in."""
        names = {k: eid for (k, is_date), eid in found.items() if not is_date}
        dated = defaultdict(set)  # event id -> date entities said there
        for m in mentions:
            if m.type in _DATES:
                dated[m.event_id].add(found[(alias_key(m.surface), True)])
        patterns = {k: re.compile(rf"(?<!\w){re.escape(k)}(?!\w)") for k in names}
        for mem in ex.memories:
            low = mem.text.casefold()
            counts: dict[str, int] = defaultdict(int)
            for k, eid in names.items():
                if k in low:  # a match needs the key's text: most memories name few of them
                    counts[eid] += len(patterns[k].findall(low))
            for event_id in mem.event_ids:
                for eid in dated.get(event_id, ()):
                    counts[eid] += 1
            support = Support(ex.session_id, mem.event_ids, (mem.memory_id,))
            for eid, n in counts.items():
                if n:
                    self._memory_edge(ex, mem.memory_id, MENTIONS, eid, strength_of(n), support)
            if mem.at is not None:
                first, _, _, label = month(to_date(mem.at).year, to_date(mem.at).month)
                period = self._resolve(
                    ex,
                    Mention(label, "period", mem.event_ids[0] if mem.event_ids else "", mem.at),
                    set(),
                    types,
                    found,
                )
                touched.add(period)
                self._memory_edge(ex, mem.memory_id, SAME_PERIOD, period, 1.0, support)

    def _memory_edge(
        self,
        ex: SessionExtract,
        memory_id: str,
        rtype: str,
        eid: str,
        strength: float,
        support: Support,
    ) -> None:
        rid = stable_id("rel", self.app_name, self.user_id, memory_id, rtype, eid)
        self.relations[rid] = Relation(
            rid,
            self.app_name,
            self.user_id,
            memory_id,
            "memory",
            rtype,
            eid,
            "entity",
            strength=strength,
            recorded_at=ex.recorded_at,
            supports=(support,),
            changed_by=f"session:{ex.session_id}",
        )

    # -- forgetting -----------------------------------------------------------------
    def forget_session(self, session_id: str) -> bool:
        """Remove what ``session_id`` alone supports; the rest loses its evidence from
        it. Closures it caused are undone. True when anything changed."""
        changed = self._drop(session_id)
        if changed:
            close_superseded(self.relations)
            derive(self.relations, self.app_name, self.user_id)
        return changed

    def _drop(self, session_id: str) -> bool:
        why = f"forget:{session_id}"
        changed = False
        if self._held is not None:
            self._held.discard(session_id)
        for rid, r in list(self.relations.items()):
            if session_id in r.session_ids:
                changed = True
                rest = tuple(s for s in r.supports if s.session_id != session_id)
                if not rest:
                    del self.relations[rid]
                elif r.src_kind == "entity" and r.type in TYPED:
                    self.relations[rid] = r.bumped(why, supports=rest, **_evidence(rest))
                else:
                    self.relations[rid] = r.bumped(why, supports=rest)
        for eid, e in list(self.entities.items()):
            if session_id in e.session_ids:
                changed = True
                rest = tuple(s for s in e.supports if s.session_id != session_id)
                if rest:
                    self.entities[eid] = replace(
                        e,
                        supports=rest,
                        version=e.version + 1,
                        changed_by=why,
                        mention_count=sum(len(s.event_ids) for s in rest),
                    )
                else:
                    del self.entities[eid]
        for k, a in list(self.aliases.items()):
            rest_sessions = tuple(s for s in a.session_ids if s != session_id)
            if not rest_sessions or a.entity_id not in self.entities:
                del self.aliases[k]
            elif rest_sessions != a.session_ids:
                self.aliases[k] = replace(a, session_ids=rest_sessions)
        for eid, e in list(self.entities.items()):  # the name must still be an alias
            names = [a.alias for (owner, _), a in self.aliases.items() if owner == eid]
            if names and alias_key(e.name) not in {alias_key(n) for n in names}:
                self.entities[eid] = replace(e, name=max(names, key=len))
        self.relations = {
            rid: r
            for rid, r in self.relations.items()
            if (r.src_kind == "memory" or r.src in self.entities) and r.dst in self.entities
        }
        self._reindex()
        return changed

    # -- asking -----------------------------------------------------------------------
    def named(self, key: str) -> str | None:
        """The entity whose alias key (:func:`mnemoray.graph.model.alias_key`) is ``key``."""
        return self._index.exact.get(key)

    def find(self, name: str) -> Entity | None:
        """The entity a name means: an alias, else the likeliest person it may be."""
        types = self._types
        if types is None:
            types = self._types = {eid: e.type for eid, e in self.entities.items()}
        match = self._index.match(name, "person", set(), types)
        eid = match.entity_id or (match.links[0][0] if match.links else None)
        return self.entities.get(eid) if eid else None

    def facts(
        self, entity_id: str, at: float | None = None, types: Iterable[str] | None = None
    ) -> list[Relation]:
        """Typed facts about an entity (either end): those still open (``at`` None, "as
        of now") or those that held at world time ``at``."""
        wanted = set(types) if types is not None else None
        out = [
            r
            for r in self.relations.values()
            if r.src_kind == "entity"
            and entity_id in (r.src, r.dst)
            and (wanted is None or r.type in wanted)
            and (r.valid_to is None if at is None else r.valid_at(at))
        ]
        return sorted(out, key=lambda r: (r.type, r.valid_from or 0.0, r.relation_id))

    def history(self, entity_id: str, rtype: str) -> list[Relation]:
        """An entity's facts of one type, oldest first (where someone lived, in order)."""
        return history(self.relations.values(), entity_id, rtype)

    def superseded_by(self, relation_id: str) -> list[Relation]:
        return superseded(self.relations, relation_id)
