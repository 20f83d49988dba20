"""A user's relations by id, logging what changed for the validity rules.

``UserGraph.relations`` is a :class:`Relations`: a dict (id -> relation, in the order the
ids came in) that keeps, with every change made through it, what
:mod:`mnemoray.graph.validity` needs to redo only the part a change can affect:

- the functional facts by (subject, type): the groups whose closing is recomputed are
  those a change touched (``dirty_groups``);
- the facts by the id that ended them (``ended``): a derived relation depends on its
  fact and the fact that closed it, so a change to either redoes it (``dirty_facts``);
- the relations by (src, type, dst) (``same``): where a statement finds the fact it
  restates, without a pass over every relation;
- the order ids came in (``seq``), which the derived relations are listed in.

A graph switches to one after its first few sessions (``UserGraph``): building the
indexes costs about as much as a few full passes, and a commit adds one or two sessions
to most of the graphs it reads. A new :class:`Relations` counts every relation as changed
when first indexed, so that pass recomputes everything, as a full pass does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from mnemoray.graph.model import DERIVED, FUNCTIONAL, Relation

STATED = "stated"  # ended_by: the text itself said the fact ended (mnemoray.graph.validity)
Group = tuple[str, str]  # (subject, functional relation type)
Edge = tuple[str, str, str]  # (src, type, dst)


class Relations(dict[str, Relation]):
    """Relations by id, with the indexes and the change log described above."""

    def __init__(
        self,
        items: Mapping[str, Relation] | Iterable[tuple[str, Relation]] = (),
    ) -> None:
        super().__init__(items)
        self.indexed = False
        self.seq: dict[str, int] = {}
        self._next = 0
        self.groups: dict[Group, set[str]] = defaultdict(set)
        self.ended: dict[str, set[str]] = defaultdict(set)
        self.same: dict[Edge, set[str]] = defaultdict(set)
        self.derived: set[str] = set()
        self.dirty_groups: set[Group] = set()
        self.dirty_facts: set[str] = set()
        # Derived relations already made, per fact that made them, and for which owner
        # (mnemoray.graph.validity).
        self.made: dict[str, list[Relation]] = {}
        self.made_for: tuple[str, str] | None = None

    def index(self) -> Relations:
        """Build the indexes, once; until then every relation counts as changed."""
        if not self.indexed:
            self.indexed = True
            for rid, r in self.items():
                self.seq[rid] = self._next
                self._next += 1
                self._index(rid, r)
        return self

    # -- every change goes through these two --------------------------------------------
    def __setitem__(self, rid: str, r: Relation) -> None:
        if not self.indexed:
            dict.__setitem__(self, rid, r)
            return
        old = dict.get(self, rid)
        if old is not None:
            self._unindex(rid, old)
        else:
            self.seq[rid] = self._next
            self._next += 1
        dict.__setitem__(self, rid, r)
        self._index(rid, r)

    def __delitem__(self, rid: str) -> None:
        old = self[rid]
        dict.__delitem__(self, rid)
        if not self.indexed:
            return
        self._unindex(rid, old)
        del self.seq[rid]

    def _index(self, rid: str, r: Relation) -> None:
        self.same[(r.src, r.type, r.dst)].add(rid)
        if r.type in DERIVED:
            self.derived.add(rid)
            return
        self.dirty_facts.add(rid)
        self.dirty_facts.update(self.ended.get(rid, ()))  # facts this one closed
        if r.type in FUNCTIONAL:
            self.groups[(r.src, r.type)].add(rid)
            self.dirty_groups.add((r.src, r.type))
        if r.ended_by not in ("", STATED):
            self.ended[r.ended_by].add(rid)

    def _unindex(self, rid: str, r: Relation) -> None:
        _discard(self.same, (r.src, r.type, r.dst), rid)
        if r.type in DERIVED:
            self.derived.discard(rid)
            return
        self.dirty_facts.add(rid)
        self.dirty_facts.update(self.ended.get(rid, ()))
        if r.type in FUNCTIONAL:
            _discard(self.groups, (r.src, r.type), rid)
            self.dirty_groups.add((r.src, r.type))
        if r.ended_by not in ("", STATED):
            _discard(self.ended, r.ended_by, rid)

    # -- the rest of dict's changes, through the two above ---------------------------------
    def pop(self, rid: str, *default: Any) -> Any:
        if rid not in self:
            if default:
                return default[0]
            raise KeyError(rid)
        r = self[rid]
        del self[rid]
        return r

    def popitem(self) -> tuple[str, Relation]:
        rid = next(reversed(self))
        return rid, self.pop(rid)

    def setdefault(self, rid: str, default: Relation) -> Relation:
        if rid not in self:
            self[rid] = default
        return self[rid]

    def update(self, *args: Any, **kwargs: Relation) -> None:
        for rid, r in dict(*args, **kwargs).items():
            self[rid] = r

    def __ior__(self, other: Any) -> Relations:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        for rid in list(self):
            del self[rid]

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its items: unpickled, every relation counts as changed.
        return (Relations, (list(self.items()),))

    # -- what the validity rules read ------------------------------------------------------
    def in_order(self, ids: Iterable[str]) -> list[str]:
        """``ids`` (held here) in the order the dict holds them."""
        return sorted(ids, key=self.index().seq.__getitem__)

    def move_derived(self, made: Iterable[Relation]) -> None:
        """Drop every derived relation, then add ``made`` at the end, in order, each id
        once (the first kept) and none that a relation of another type holds. Derived
        relations change nothing any rule reads, so only their own index is kept here."""
        for rid in self.derived:
            old = dict.pop(self, rid)
            _discard(self.same, (old.src, old.type, old.dst), rid)
            del self.seq[rid]
        self.derived = set()
        for r in made:
            rid = r.relation_id
            if rid in self:
                continue
            dict.__setitem__(self, rid, r)
            self.seq[rid] = self._next
            self._next += 1
            self.same[(r.src, r.type, r.dst)].add(rid)
            self.derived.add(rid)


def matching(relations: dict[str, Relation], src: str, rtype: str, dst: str) -> list[Relation]:
    """The relations from ``src`` to ``dst`` of type ``rtype``, in the dict's order (not
    indexed yet: by a pass over them)."""
    if isinstance(relations, Relations) and relations.indexed:
        found = relations.same.get((src, rtype, dst), ())
        return [relations[rid] for rid in relations.in_order(found)]
    return [r for r in relations.values() if (r.src, r.type, r.dst) == (src, rtype, dst)]


def _discard(index: dict[Any, set[str]], key: Any, rid: str) -> None:
    found = index.get(key)
    if found is not None:
        found.discard(rid)
        if not found:
            del index[key]
