"""The graph's part in recall: the entities a question names, the memories that mention
them, the facts it asks about (as they hold now, or as they held before), and one hop
from the best hits to the memories of their entities in other sessions.

    gr = GraphRecall(user_graph, memory_ids, session_ids)  # once per candidate set
    gq = gr.query("Where did Liz live before Seattle?")    # names, asked relations
    gr.entity_signal(gq)                                   # the entity axis
    gr.graph_signal(gq, past=True, present=False, seeds=top_positions)

Two signals over a candidate set's positions (:mod:`mnemoray.memory.recall.fusion` weighs them):

- ``entity``: memories that ``mention`` an entity the question names, by any of its
  aliases ("Liz" finds what was said of Elizabeth), each entity counted by how
  specific it is (:meth:`GraphRecall.specificity`): a place named twice counts, a
  speaker named in every line of the conversation almost not;
- ``graph``, in [-1, 1]: 1 for the memories that state a fact the question asks about
  (a named entity and a relation its words ask, :mod:`mnemoray.graph.cues`) as it holds
  now, or, for a question about the past, as it held before (the facts that were
  closed, first those a named fact superseded: "before Berlin"); the specificity
  (times :data:`END`) for memories of the entity at the fact's other end ("his
  brother" -> Felix -> what was said of Felix); :data:`HOP` times the specificity and
  the mention's strength for memories of the entities the best hits mention, in sessions
  other than the hits' (the other sessions about them), and the hits themselves as much
  as the most any of those got; -1 for a memory that only states facts of an asked,
  changing relation that no longer hold, when the question asks how things are. A name
  the resolution kept apart but linked (``same_entity``) asks about both entities.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mnemoray.graph.cues import asked_relations
from mnemoray.graph.extract import USER_AUTHORS
from mnemoray.graph.graph import UserGraph
from mnemoray.graph.model import FUNCTIONAL, MENTIONS, SAME_ENTITY, TYPED, Relation, alias_key
from mnemoray.text import terms

HOP = 0.5  # a memory one hop from a best hit: half what a memory of an asked fact gets
END = 1.0  # a memory of the entity at an asked fact's other end ("his brother": Felix)
STALE = -1.0
_DATES = frozenset({"date", "period"})  # the time axis reads dates, not the graph
_LONGEST = 4  # words in the longest name looked up
_FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself"})
_WORD = re.compile(r"[^\W_][\w'\u2019\-]*")


@dataclass(frozen=True)
class GraphQuery:
    """What a question asks the graph: the entities it names (ids) and the typed
    relations its words ask about."""

    entities: tuple[str, ...]
    relations: frozenset[str]
    #: The user's own entity when the question speaks in the first person ("where do
    #: I live?"): whose facts it asks about. No entity evidence: the user is in every
    #: memory of theirs.
    asker: str | None = None


@dataclass(frozen=True)
class StatedFact:
    """A typed fact a recalled memory states, with when it held in the conversation's
    world (None: unknown) and whether it holds now (no later fact closed it)."""

    relation: str
    subject: str
    object: str
    valid_from: float | None
    valid_to: float | None
    holds: bool


def _closed(r: Relation) -> bool:
    return r.valid_to is not None or bool(r.ended_by)


class GraphRecall:
    """A user's graph laid over one candidate set (positions are the set's)."""

    def __init__(
        self, graph: UserGraph, memory_ids: Sequence[str], session_ids: Sequence[str] | None = None
    ) -> None:
        self.graph = graph
        self.size = len(memory_ids)
        # Each position's session (the hop reaches other sessions); without them every
        # memory is its own session.
        self._sessions = np.asarray(
            session_ids if session_ids is not None else memory_ids, dtype=object
        )
        pos = {m: i for i, m in enumerate(memory_ids)}
        mentions: dict[str, dict[int, float]] = defaultdict(dict)
        for r in graph.relations.values():
            if r.type != MENTIONS or r.src_kind != "memory" or r.src not in pos:
                continue
            e = graph.entities.get(r.dst)
            if e is not None and e.type not in _DATES:
                mentions[r.dst][pos[r.src]] = r.strength
        self._mentions = {
            eid: (np.fromiter(d, np.int64, len(d)), np.fromiter(d.values(), np.float64, len(d)))
            for eid, d in mentions.items()
        }
        linked = len({p for d in mentions.values() for p in d})
        scale = math.log(max(linked, 2))
        self._specificity = {
            eid: max(0.0, math.log(linked / len(d)) / scale) for eid, d in mentions.items()
        }
        # The participants: in every session of theirs, so no hop goes through them.
        self._speakers = frozenset(eid for eid in mentions if graph.entities[eid].speaker)
        self._entities_of: dict[int, list[str]] = defaultdict(list)
        for eid, d in mentions.items():
            for p in d:
                self._entities_of[p].append(eid)
        # Names the resolution kept apart but linked ("Gabe" / "Gabriel" at 0.6): a
        # question naming one asks about the other too.
        self._same: dict[str, list[str]] = defaultdict(list)
        self._facts: list[tuple[Relation, np.ndarray]] = []
        self._facts_by_position: dict[int, list[Relation]] | None = None
        for r in graph.relations.values():
            if r.type == SAME_ENTITY:
                self._same[r.src].append(r.dst)
                self._same[r.dst].append(r.src)
            if r.src_kind == "entity" and r.type in TYPED:
                found = [pos[m] for m in r.memory_ids if m in pos]
                if found:
                    self._facts.append((r, np.asarray(found, dtype=np.int64)))

    def facts_at(self, position: int) -> tuple[StatedFact, ...]:
        """The typed facts the memory at ``position`` states, oldest first."""
        if self._facts_by_position is None:
            by: dict[int, list[Relation]] = defaultdict(list)
            for r, found in self._facts:
                for p in found:
                    by[int(p)].append(r)
            self._facts_by_position = by
        names = self.graph.entities
        return tuple(
            StatedFact(
                r.type,
                names[r.src].name if r.src in names else r.src,
                names[r.dst].name if r.dst in names else r.dst,
                r.valid_from,
                r.valid_to,
                not _closed(r),
            )
            for r in sorted(
                self._facts_by_position.get(position, ()),
                key=lambda r: (r.valid_from or 0.0, r.relation_id),
            )
        )

    def specificity(self, entity_id: str) -> float:
        """1 for an entity one memory mentions, toward 0 for one that nearly every
        memory mentions (an inverse document frequency scaled to [0, 1])."""
        return self._specificity.get(entity_id, 0.0)

    # -- the question -----------------------------------------------------------------
    def query(self, question: str) -> GraphQuery:
        named = self.named(question)
        linked = [other for eid in named for other in self._same.get(eid, ())]
        return GraphQuery(
            tuple(dict.fromkeys((*named, *linked))),
            asked_relations(question),
            self.asker(question),
        )

    def asker(self, question: str) -> str | None:
        """The user's entity, when ``question`` speaks in the first person: the user is
        the one who asks (their memories are the only ones searched)."""
        if not any(w.lower() in _FIRST_PERSON for w in _WORD.findall(question)):
            return None
        for author in USER_AUTHORS:
            eid = self.graph.named(alias_key(author))
            if eid is not None and self.graph.entities[eid].speaker:
                return eid
        return None

    def named(self, question: str) -> tuple[str, ...]:
        """The entities ``question`` names: the longest alias at each place, else a
        capitalised word the graph's person rules resolve ("Bob" -> Robert)."""
        words = [w.rstrip(".") for w in _WORD.findall(question)]
        found: list[str] = []
        i = 0
        while i < len(words):
            for n in range(min(_LONGEST, len(words) - i), 0, -1):
                eid = self.graph.named(alias_key(" ".join(words[i : i + n])))
                if eid is not None and self.graph.entities[eid].type not in _DATES:
                    found.append(eid)
                    i += n
                    break
            else:
                word = words[i]
                if word[:1].isupper() and len(word) >= 3 and terms(word):
                    e = self.graph.find(word)
                    if e is not None and e.type not in _DATES:
                        found.append(e.entity_id)
                i += 1
        return tuple(dict.fromkeys(found))

    # -- the signals ------------------------------------------------------------------
    def entity_signal(self, gq: GraphQuery) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float64)
        for eid in gq.entities:
            self._add(out, eid, self.specificity(eid))
        return out

    def graph_signal(
        self, gq: GraphQuery, past: bool, present: bool, seeds: Iterable[int] = ()
    ) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float64)
        named = set(gq.entities) | ({gq.asker} if gq.asker else set())
        stale = np.zeros(self.size, dtype=bool)
        current = np.zeros(self.size, dtype=bool)
        for r, positions in self._asked_facts(gq, named, past):
            out[positions] = 1.0
            for end in (r.src, r.dst):
                if end not in named:
                    self._hop(out, end, END, strength=False)
        if not past and (present or gq.relations & FUNCTIONAL):
            for r, positions in self._facts:
                if (
                    r.type in gq.relations
                    and r.type in FUNCTIONAL
                    and (r.src in named or r.dst in named)
                ):
                    (stale if _closed(r) else current)[positions] = True
        seeds = [int(p) for p in seeds]
        if seeds:
            hopped = np.zeros(self.size, dtype=np.float64)
            for p in seeds:
                for eid in self._entities_of.get(p, ()):
                    # A speaker is in every session of theirs: no evidence of a topic.
                    if eid not in named and eid not in self._speakers:
                        self._hop(hopped, eid, HOP)
            # The hop reaches the *other* sessions of a best hit's entities. The hits
            # rise together, by the most it gave any of those: they keep their order
            # (a hit's own incidental name, "Called" in a tool call's line, must not
            # lift it over a better one) and stay ahead of what they brought in.
            hopped[np.isin(self._sessions, self._sessions[seeds])] = 0.0
            hopped[seeds] = hopped.max()
            np.maximum(out, hopped, out=out)
        out[stale & ~current] = STALE
        return out

    def _asked_facts(
        self, gq: GraphQuery, named: set[str], past: bool
    ) -> list[tuple[Relation, np.ndarray]]:
        """The facts of a named entity and an asked relation, as they hold now (open)
        or, for the past, those since closed; a fact closed by one that touches a named
        entity ("before Berlin") is asked even when its own ends are not named."""
        if not named or not gq.relations:
            return []
        asked = [(r, p) for r, p in self._facts if r.type in gq.relations]
        if not past:
            return [(r, p) for r, p in asked if not _closed(r) and {r.src, r.dst} & named]
        closers = {r.relation_id for r, _ in asked if {r.src, r.dst} & named}
        before = [(r, p) for r, p in asked if _closed(r) and r.ended_by in closers]
        return before or [(r, p) for r, p in asked if _closed(r) and {r.src, r.dst} & named]

    def _add(self, out: np.ndarray, eid: str, weight: float) -> None:
        found = self._mentions.get(eid)
        if found is not None and weight > 0:
            np.add.at(out, found[0], weight * found[1])

    def _hop(self, out: np.ndarray, eid: str, share: float, strength: bool = True) -> None:
        """Raise the memories that mention ``eid`` to ``share`` of its specificity (times
        how strongly each mentions it, with ``strength``)."""
        found = self._mentions.get(eid)
        if found is not None:
            value = share * self.specificity(eid) * (found[1] if strength else 1.0)
            out[found[0]] = np.maximum(out[found[0]], value)


__all__ = ["HOP", "STALE", "GraphQuery", "GraphRecall", "StatedFact"]
