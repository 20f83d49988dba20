"""Which entity a surface form names, across a user's sessions.

Rules, in order (docs/graph.md, "Resolution"):

1. the same alias (case-folded, without "the" or a possessive) is the same entity;
2. a person's short form is a candidate for a longer one: a first name of a full
   name ("Melanie" / "Melanie Rivera", 0.7), a known nickname ("Bob" / "Robert",
   0.7), or a prefix of at least three letters ("Mel" / "Melanie", 0.6);
3. evidence raises a candidate: both forms said in the same session (co-reference,
   e.g. Caroline writes "Mel" in a conversation with Melanie) adds 0.25;
4. two or more candidates make each half as likely (ambiguous);
5. a candidate at 0.75 or above is merged (the alias joins the entity, the entity
   takes the fuller name); below, the form gets its own entity and a
   ``same_entity`` relation with that confidence keeps the two reachable.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from mnemoray.graph.model import alias_key

MERGE_AT = 0.75
CO_REFERENCE = 0.25
LINK_AT = 0.3  # below this a candidate is not even linked
_NICK_GROUPS = """
abby:abigail al:albert,alan,alfred alex:alexander,alexandra,alexis andy:andrew,andrea
ben:benjamin beth:elizabeth,bethany bill:william billy:william bob:robert bobby:robert
cathy:catherine,cathrine chris:christopher,christina,christine dan:daniel danny:daniel
dave:david deb:deborah debbie:deborah ed:edward eddie:edward jim:james jimmy:james
jen:jennifer jenny:jennifer joe:joseph joey:joseph john:jonathan jon:jonathan kate:katherine,kathryn
katie:katherine,kathryn kathy:katherine,kathryn ken:kenneth kim:kimberly liz:elizabeth
lizzie:elizabeth matt:matthew meg:megan,margaret mel:melanie,melissa,melinda mike:michael
mick:michael nate:nathan,nathaniel nick:nicholas nicky:nicole,nicholas pat:patrick,patricia
peggy:margaret rob:robert robbie:robert ron:ronald sam:samuel,samantha sandy:sandra
steve:steven,stephen sue:susan suzy:susan ted:edward,theodore tom:thomas tommy:thomas
tony:anthony vicky:victoria will:william zach:zachary greg:gregory jess:jessica,jesse
jo:joanna,josephine,johanna josh:joshua max:maximilian,maxwell nat:natalie,natasha
fred:frederick rick:richard ricky:richard dick:richard becky:rebecca bec:rebecca
"""
NICKNAMES: dict[str, frozenset[str]] = {}
for _pair in _NICK_GROUPS.split():
    _short, _longs = _pair.split(":")
    NICKNAMES[_short] = frozenset(_longs.split(","))
_FULL_TO_NICK: dict[str, set[str]] = defaultdict(set)
for _nick, _fulls in NICKNAMES.items():
    for _full in _fulls:
        _FULL_TO_NICK[_full].add(_nick)
_PERSONISH = frozenset({"person", "thing"})  # an untyped capitalised name may be a person


@dataclass(frozen=True)
class Match:
    """What a surface form resolves to: ``entity_id`` (None: a new entity), by which
    rule and how sure; ``links``: unmerged candidates (entity id, confidence)."""

    entity_id: str | None
    rule: str
    confidence: float
    links: tuple[tuple[str, float], ...] = ()


def _pair_rule(short: str, other: str) -> tuple[str, float] | None:
    """How two different alias keys of people may name one person."""
    a, b = short.split(), other.split()
    if len(a) == 1 and len(b) > 1 and a[0] == b[0] or len(b) == 1 and len(a) > 1 and a[0] == b[0]:
        return "first_name", 0.7
    fa, fb = a[0], b[0]
    rest_ok = len(a) == 1 or len(b) == 1 or a[1:] == b[1:]
    if rest_ok and (fb in NICKNAMES.get(fa, ()) or fa in NICKNAMES.get(fb, ())):
        return "nickname", 0.7
    if (
        len(a) == 1
        and len(b) == 1
        and min(len(fa), len(fb)) >= 3
        and fa != fb
        and (fa.startswith(fb) or fb.startswith(fa))
    ):
        return "prefix", 0.6
    return None


class AliasIndex:
    """Alias keys of a user's entities, indexed for the rules above."""

    def __init__(self) -> None:
        self.exact: dict[str, str] = {}  # key -> entity id
        self.keys: dict[str, set[str]] = defaultdict(set)  # person-ish entity -> its keys
        self._by_first: dict[str, set[str]] = defaultdict(set)  # first word -> entities
        self._by_lead: dict[str, set[str]] = defaultdict(set)  # first 3 letters -> entities

    def add(self, entity_id: str, key: str, personish: bool) -> None:
        self.exact.setdefault(key, entity_id)
        if personish and key:
            first = key.split()[0]
            self.keys[entity_id].add(key)
            self._by_first[first].add(entity_id)
            self._by_lead[first[:3]].add(entity_id)

    def remove_entity(self, entity_id: str) -> None:
        for key in [k for k, e in self.exact.items() if e == entity_id]:
            del self.exact[key]
        for key in self.keys.pop(entity_id, set()):
            first = key.split()[0]
            self._by_first[first].discard(entity_id)
            self._by_lead[first[:3]].discard(entity_id)

    def match(
        self, surface: str, type_: str, session_keys: set[str], types: dict[str, str]
    ) -> Match:
        """Resolve ``surface`` (of ``type_``) given the alias keys said in the same
        session and each entity's type."""
        key = alias_key(surface)
        if key in self.exact:
            found = self.exact[key]
            if (types.get(found) in ("date", "period")) == (type_ in ("date", "period")):
                return Match(found, "exact", 1.0)
        if type_ not in _PERSONISH or not key:
            return Match(None, "name", 1.0)
        first = key.split()[0]
        pool = set(self._by_first.get(first, ())) | set(self._by_lead.get(first[:3], ()))
        for other in (*NICKNAMES.get(first, ()), *_FULL_TO_NICK.get(first, ())):
            pool |= self._by_first.get(other, set())
        scored: list[tuple[float, str, str]] = []
        for eid in sorted(pool):
            if types.get(eid) not in _PERSONISH:
                continue
            best: tuple[str, float] | None = None
            for k in self.keys.get(eid, ()):
                rule = _pair_rule(key, k)
                if rule and (best is None or rule[1] > best[1]):
                    best = rule
            if best is None:
                continue
            together = any(k in session_keys for k in self.keys[eid]) and key in session_keys
            scored.append((best[1] + (CO_REFERENCE if together else 0.0), eid, best[0]))
        if not scored:
            return Match(None, "name", 1.0)
        if len(scored) > 1:  # ambiguous: "Mel" may be Melanie or Melissa
            scored = [(round(s / 2, 3), eid, rule) for s, eid, rule in scored]
        scored.sort(key=lambda s: (-s[0], s[1]))
        top, eid, rule_name = scored[0]
        if top >= MERGE_AT:
            return Match(eid, rule_name, round(min(top, 0.99), 3))
        links = tuple((e, round(s, 3)) for s, e, _ in scored if s >= LINK_AT)
        return Match(None, "name", 1.0, links)
