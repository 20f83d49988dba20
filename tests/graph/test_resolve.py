"""Entity resolution across a user's sessions: one entity for "Mel" and "Melanie" when the
evidence supports it, aliases kept with their rule and confidence; a link, not a merge,
when it does not."""

from __future__ import annotations

from datetime import date

from mnemoray.graph import UserGraph, extract_session
from mnemoray.graph.model import SAME_ENTITY
from mnemoray.graph.resolve import MERGE_AT, AliasIndex
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.temporal import epoch


def conv(sid: str, day: date, *turns: tuple[str, str]) -> Session:
    t = epoch(day) + 9 * 3600
    events = [
        Event(author=a, role="user", text=x, id=f"{sid}-{i}", session_id=sid, timestamp=t + 60 * i)
        for i, (a, x) in enumerate(turns)
    ]
    return Session("app", "u1", session_id=sid, events=events, created_at=t)


def build(*sessions: Session) -> UserGraph:
    g = UserGraph("app", "u1")
    for s in sessions:
        g.add_session(extract_session(s, recorded_at=1.0))
    return g


def people(g: UserGraph) -> dict[str, set[str]]:
    """Named entities (not dates) and their aliases."""
    return {
        e.name: {a.alias for a in g.aliases.values() if a.entity_id == e.entity_id}
        for e in g.entities.values()
        if e.type not in ("date", "period")
    }


def test_a_nickname_used_in_the_same_session_joins_the_speaker() -> None:
    g = build(
        conv(
            "s1",
            date(2023, 5, 8),
            ("Melanie", "Hi Caroline!"),
            ("Caroline", "Hey Mel, how are you?"),
        )
    )
    assert people(g) == {"Melanie": {"Melanie", "Mel"}, "Caroline": {"Caroline"}}
    mel = next(a for a in g.aliases.values() if a.alias == "Mel")
    assert mel.rule == "nickname" and mel.confidence >= MERGE_AT
    assert g.find("Mel") == g.find("melanie") == g.find("Melanie")


def test_the_short_form_seen_first_takes_the_fuller_name_later() -> None:
    g = build(
        conv("s1", date(2023, 5, 8), ("Caroline", "I met Mel today."), ("Dave", "Mel? Nice.")),
        conv("s2", date(2023, 6, 1), ("Melanie", "Caroline, it's me!"), ("Caroline", "Mel, hi!")),
    )
    mel = g.find("Mel")
    assert mel is not None and mel.name == "Melanie" and mel.speaker
    assert set(mel.session_ids) == {"s1", "s2"} and mel.version == 2


def test_a_first_name_joins_the_full_name_seen_with_it() -> None:
    g = build(conv("s1", date(2023, 5, 8), ("Caroline", "I met Jon Rivera at work. Jon is funny.")))
    jon = g.find("Jon")
    assert jon is not None and jon.name == "Jon Rivera"
    assert g.find("Jon Rivera") == jon


def test_without_co_reference_the_forms_are_linked_not_merged() -> None:
    g = build(
        conv("s1", date(2023, 5, 8), ("Caroline", "My friend Melanie called.")),
        conv("s2", date(2023, 6, 1), ("Caroline", "Yesterday Mel sent me a letter.")),
    )
    assert set(people(g)) >= {"Melanie", "Mel"}
    links = [r for r in g.relations.values() if r.type == SAME_ENTITY]
    assert len(links) == 1
    link = links[0]
    assert {g.entities[link.src].name, g.entities[link.dst].name} == {"Mel", "Melanie"}
    assert link.confidence < MERGE_AT and link.session_ids == ("s2",)


def test_an_ambiguous_short_form_is_not_merged() -> None:
    g = build(
        conv("s1", date(2023, 5, 8), ("Caroline", "I saw Melanie and Melissa.")),
        conv(
            "s2",
            date(2023, 6, 1),
            ("Caroline", "I saw Melanie and Melissa again, and Mel brought cake."),
        ),
    )
    assert "Mel" in people(g)
    links = sorted(g.entities[r.dst].name for r in g.relations.values() if r.type == SAME_ENTITY)
    assert links == ["Melanie", "Melissa"]


def test_places_and_orgs_are_joined_only_by_the_same_alias() -> None:
    g = build(
        conv(
            "s1",
            date(2023, 5, 8),
            ("Caroline", "I moved to Paris. Paris is big!"),
            ("Dave", "Parisians are lucky. I work at Acme."),
        ),
        conv("s2", date(2023, 6, 1), ("Caroline", "Acme called. Back in Paris now.")),
    )
    paris = [e for e in g.entities.values() if e.name == "Paris"]
    assert len(paris) == 1 and set(paris[0].session_ids) == {"s1", "s2"}
    assert paris[0].type == "place"
    assert len([e for e in g.entities.values() if e.name == "Acme"]) == 1


def test_dates_and_names_live_in_separate_namespaces() -> None:
    index = AliasIndex()
    index.add("ent-may", "2023-05", personish=False)
    match = index.match("2023-05", "thing", set(), {"ent-may": "period"})
    assert match.entity_id is None


def test_resolution_does_not_depend_on_the_python_process() -> None:
    sessions = (
        conv("s1", date(2023, 5, 8), ("Melanie", "Hi Caroline!"), ("Caroline", "Hey Mel!")),
    )
    a, b = build(*sessions), build(*sessions)
    assert a.entities == b.entities and a.aliases == b.aliases and a.relations == b.relations


class _CountedItems(dict):
    """An entity map that counts passes over it."""

    passes = 0

    def items(self):  # type: ignore[override]
        self.passes += 1
        return super().items()


def test_find_keeps_entity_types_until_the_entities_change() -> None:
    g = UserGraph("app", "u1")
    assert g.find("Mel") is None  # (an empty graph's types are kept too)
    g.add_session(
        extract_session(
            conv("s1", date(2023, 5, 8), ("Caroline", "My friend Melanie called.")), recorded_at=1.0
        )
    )
    # A nickname is resolved through the types: a kept map from before s1 would miss her.
    mel = g.find("Mel")
    assert mel is not None and mel.name == "Melanie"
    g.entities = counted = _CountedItems(g.entities)
    for name in ("Mel", "Caroline", "Zed", "Mel"):
        g.find(name)
    assert counted.passes == 0  # no pass over every entity per name asked
    g.forget_session("s1")
    assert g.find("Mel") is None and g.find("Melanie") is None
