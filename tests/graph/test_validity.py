"""Knowledge updates and forgetting: a newer functional fact closes the older one (nothing
deleted), "as of now" vs "as of T", the past still found; forgetting a session removes
what it alone supports and undoes the closures it caused."""

from __future__ import annotations

from datetime import date

import pytest

from mnemoray.errors import InvalidInput
from mnemoray.graph import UserGraph, extract_session
from mnemoray.graph.extract import SessionExtract
from mnemoray.graph.model import CONTRADICTS, EXTENDS, MENTIONS, SAME_PERIOD, Relation
from mnemoray.memory.records.distill import distill_session
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.temporal import epoch, to_date


def conv(sid: str, day: date, *turns: tuple[str, str], user: str = "u1") -> Session:
    t = epoch(day) + 9 * 3600
    events = [
        Event(author=a, role="user", text=x, id=f"{sid}-{i}", session_id=sid, timestamp=t + 60 * i)
        for i, (a, x) in enumerate(turns)
    ]
    return Session("app", user, session_id=sid, events=events, created_at=t)


def ex(s: Session) -> SessionExtract:
    memories = distill_session(s, None, summarize=False, chunk_turns=2, now=0)
    return extract_session(s, memories, recorded_at=1.0)


S1 = conv(
    "s1",
    date(2023, 5, 8),
    ("Melanie", "I live in Berlin. I work at Acme Labs."),
    ("Caroline", "Cool, Mel."),
)
S2 = conv(
    "s2",
    date(2023, 9, 2),
    ("Melanie", "Big news: I moved to Paris last month!"),
    ("Caroline", "Wow Mel!"),
)
S3 = conv(
    "s3", date(2024, 1, 10), ("Melanie", "I still live in Paris."), ("Caroline", "Lovely, Mel.")
)


def graph(*sessions: Session) -> UserGraph:
    g = UserGraph("app", "u1")
    for s in sessions:
        g.add_session(ex(s))
    return g


def named(g: UserGraph, rels: list[Relation]) -> list[tuple[str, str]]:
    return sorted((r.type, g.entities[r.dst].name) for r in rels)


def lived(g: UserGraph) -> dict[str, Relation]:
    mel = g.find("Melanie")
    assert mel is not None
    return {g.entities[r.dst].name: r for r in g.history(mel.entity_id, "lives_in")}


def test_a_newer_fact_closes_the_older_one_and_nothing_is_deleted() -> None:
    g = graph(S1, S2)
    facts = lived(g)
    berlin, paris = facts["Berlin"], facts["Paris"]
    assert to_date(paris.valid_from) == date(2023, 8, 1)  # "last month", said in September
    assert berlin.valid_to == paris.valid_from and berlin.ended_by == paris.relation_id
    assert berlin.version == 2 and berlin.changed_by == f"superseded_by:{paris.relation_id}"
    assert paris.valid_to is None and list(facts) == ["Berlin", "Paris"]  # oldest first
    assert g.superseded_by(paris.relation_id) == [berlin]


def test_as_of_now_and_as_of_a_past_time() -> None:
    g = graph(S1, S2)
    mel = g.find("Mel")
    assert mel is not None
    assert named(g, g.facts(mel.entity_id, types=["lives_in", "works_at"])) == [
        ("lives_in", "Paris"),
        ("works_at", "Acme Labs"),
    ]
    june = epoch(date(2023, 6, 15))
    assert named(g, g.facts(mel.entity_id, at=june, types=["lives_in"])) == [("lives_in", "Berlin")]
    before_anything = epoch(date(2023, 1, 1))
    assert g.facts(mel.entity_id, at=before_anything, types=["lives_in"]) == []


def test_functional_updates_only_touch_the_same_subject_and_type() -> None:
    g = graph(S1, S2)
    acme = [r for r in g.relations.values() if r.type == "works_at"]
    assert len(acme) == 1 and acme[0].valid_to is None  # moving did not end the job


def test_a_restated_fact_gains_strength_and_sessions() -> None:
    g = graph(S1, S2, S3)
    paris = lived(g)["Paris"]
    assert paris.session_ids == ("s2", "s3") and paris.strength == 0.75
    assert paris.version == 2 and paris.changed_by == "session:s3"
    assert set(paris.source_event_ids) == {"s2-0", "s3-0"}


def test_the_text_can_end_a_fact_itself() -> None:
    left = conv("s2", date(2023, 9, 2), ("Melanie", "I used to work at Acme Labs."))
    g = graph(S1, left)
    (acme,) = [r for r in g.relations.values() if r.type == "works_at"]
    # Over by the time it was said; it began when s1 said it.
    assert acme.ended_by == "stated" and acme.valid_to == left.events[0].timestamp
    assert acme.valid_from == S1.events[0].timestamp
    mel = g.find("Melanie")
    assert mel is not None and g.facts(mel.entity_id, types=["works_at"]) == []


def test_memory_relations_follow_the_facts() -> None:
    g = graph(S1, S2, S3)
    kinds = {r.type for r in g.relations.values() if r.src_kind == "memory"}
    assert kinds == {MENTIONS, SAME_PERIOD, CONTRADICTS, EXTENDS}
    berlin, paris = lived(g)["Berlin"], lived(g)["Paris"]
    contradicts = [r for r in g.relations.values() if r.type == CONTRADICTS]
    assert {(r.src, r.dst) for r in contradicts} >= {(paris.memory_ids[0], berlin.memory_ids[0])}
    periods = {g.entities[r.dst].name for r in g.relations.values() if r.type == SAME_PERIOD}
    assert periods == {"2023-05", "2023-09", "2024-01"}


def test_forgetting_a_session_removes_what_it_alone_supports() -> None:
    g = graph(S1, S2, S3)
    s2_memories = {m.memory_id for m in ex(S2).memories}
    assert g.forget_session("s2") is True
    assert "s2" not in g.sessions()
    assert not any(r.src in s2_memories or r.dst in s2_memories for r in g.relations.values())
    # Paris is still said in s3: it stays, dated by s3 alone now.
    facts = lived(g)
    assert facts["Paris"].session_ids == ("s3",)
    assert facts["Paris"].valid_from == S3.events[0].timestamp
    assert facts["Berlin"].valid_to == facts["Paris"].valid_from
    assert facts["Paris"].changed_by == "forget:s2"
    assert g.forget_session("s2") is False


def test_forgetting_the_newer_fact_reopens_the_older() -> None:
    g = graph(S1, S2)
    assert g.forget_session("s2")
    berlin = lived(g)["Berlin"]
    assert berlin.valid_to is None and berlin.ended_by == "" and berlin.changed_by == "reopened"
    assert "Paris" not in {e.name for e in g.entities.values()}
    assert not any(r.type in (CONTRADICTS, EXTENDS) for r in g.relations.values())


def test_forgetting_every_session_leaves_nothing() -> None:
    g = graph(S1, S2)
    g.forget_session("s1")
    g.forget_session("s2")
    assert g.entities == {} and g.aliases == {} and g.relations == {}


def test_adding_a_session_again_replaces_what_it_said() -> None:
    g = graph(S1, S2)
    before = (dict(g.entities), dict(g.relations))
    g.add_session(ex(S2))
    assert {
        r.relation_id: (r.src, r.type, r.dst, r.valid_from, r.valid_to, r.session_ids)
        for r in g.relations.values()
    } == {
        r.relation_id: (r.src, r.type, r.dst, r.valid_from, r.valid_to, r.session_ids)
        for r in before[1].values()
    }
    assert set(g.entities) == set(before[0])
    grown = conv(
        "s2",
        date(2023, 9, 2),
        *[(e.author, e.text) for e in S2.events],
        ("Melanie", "Also I adopted a puppy named Max."),
    )
    g.add_session(ex(grown))
    assert "Max" in {e.name for e in g.entities.values()}


def test_a_session_of_another_user_is_refused() -> None:
    g = UserGraph("app", "u1")
    with pytest.raises(InvalidInput) as err:
        g.add_session(ex(conv("s9", date(2023, 1, 1), ("Zed", "Hi."), user="u2")))
    assert err.value.field == "session"
