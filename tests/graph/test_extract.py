"""The deterministic extractor: names and their types, relations read from text, one
session's evidence (speakers, dates resolved against each turn's date, statements)."""

from __future__ import annotations

from datetime import date

import pytest

from mnemoray.graph.extract import extract_session
from mnemoray.graph.names import find_names, is_name_like
from mnemoray.graph.patterns import read_relations
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


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("My sister Anna lives in Boston.", [("Anna", "person"), ("Boston", "place")]),
        ("Melanie works at Acme Labs now.", [("Melanie", "thing"), ("Acme Labs", "org")]),
        (
            "We hiked around Lake Tahoe with Dr. Patel.",
            [("Lake Tahoe", "place"), ("Patel", "person")],
        ),
        ("Hi Caroline! Thanks, Mel.", [("Caroline", "person"), ("Mel", "person")]),
        (
            "I joined Bank of America in Chicago.",
            [("Bank of America", "org"), ("Chicago", "place")],
        ),
        ("Okay, sounds great! Yes.", []),
    ],
)
def test_names_and_their_types(sentence: str, expected: list[tuple[str, str]]) -> None:
    assert [(n.text, n.type) for n in find_names(sentence)] == expected


def test_a_possessive_is_not_part_of_the_name() -> None:
    assert [n.text for n in find_names("It was Melanie's idea.")] == ["Melanie"]


def test_speaker_names() -> None:
    assert is_name_like("Melanie") and is_name_like("Jon Snow")
    assert not is_name_like("user") and not is_name_like("travel_agent")


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I moved to Paris last May.", [("I", "lives_in", "Paris", True, False)]),
        ("I used to live in Berlin.", [("I", "lives_in", "Berlin", False, True)]),
        ("I've been living in Lisbon since 2020.", [("I", "lives_in", "Lisbon", False, False)]),
        ("Melanie works at Acme Labs.", [("Melanie", "works_at", "Acme Labs", False, False)]),
        ("I just got a new job at Google!", [("I", "works_at", "Google", True, False)]),
        ("I quit my job at Initech.", [("I", "works_at", "Initech", False, True)]),
        (
            "I work as a social worker at the Harbor Youth Center.",
            [("I", "works_at", "Harbor Youth Center", False, False)],
        ),
        (
            "I started a new job as an accountant at Greer Partners!",
            [("I", "works_at", "Greer Partners", True, False)],
        ),
        ("I work with Tom.", []),
        ("We adopted a puppy named Max.", [("I", "adopted", "Max", True, False)]),
        ("I adopted a rescue dog.", [("I", "adopted", "dog", True, False)]),
        ("I bought a new car yesterday.", [("I", "owns", "car", False, False)]),
        ("I married Tom in 2019.", [("I", "married_to", "Tom", True, False)]),
        ("Anna is my sister.", [("Anna", "sister_of", "I", False, False)]),
        ("Caroline is Melanie's sister.", [("Caroline", "sister_of", "Melanie", False, False)]),
        ("My husband John loves it.", [("I", "married_to", "John", False, False)]),
        ("I love the weather.", []),
        # Where the speaker lives or works, said without "I live"/"I work".
        (
            "I love living in Berlin, our apartment is small.",
            [("I", "lives_in", "Berlin", False, False)],
        ),
        (
            "Our neighborhood in Toronto has the best bakeries.",
            [("I", "lives_in", "Toronto", False, False)],
        ),
        ("Life in Denver suits me.", [("I", "lives_in", "Denver", False, False)]),
        (
            "Being a pastry chef at Cafe Amara is exhausting.",
            [("I", "works_at", "Cafe Amara", False, False)],
        ),
        (
            "My shift at Westfield High ran late again.",
            [("I", "works_at", "Westfield High", False, False)],
        ),
        ("My coworker moved to Toronto.", []),
        (
            "Back in Duluth, where I was raised, winters were brutal.",
            [("I", "grew_up_in", "Duluth", False, False)],
        ),
        ("I'm from Ithaca originally.", [("I", "grew_up_in", "Ithaca", False, False)]),
        ("Coffee from Ethiopia is great.", []),
        ("I just got back from Hanoi!", [("I", "visited", "Hanoi", True, False)]),
        ("The trip to Marrakech was the best.", [("I", "visited", "Marrakech", True, False)]),
        ("We spent ten days in Crete.", [("I", "visited", "Crete", True, False)]),
        ("I got back from work late.", []),
        ("Street photography is my hobby.", [("I", "enjoys", "Street photography", False, False)]),
        ("I've really gotten into pottery.", [("I", "enjoys", "pottery", False, False)]),
        ("This is my thing.", []),
        ("Say hello to Luna, our new tabby cat!", [("I", "adopted", "Luna", True, False)]),
        ("We brought home a beagle called Olive.", [("I", "adopted", "Olive", True, False)]),
        ("Say hello to Mark, our new neighbor!", []),
        ("I got a new phone called Pixel.", []),
        ("Being a parent at times is hard.", []),
    ],
)
def test_relations_read_from_a_sentence(
    sentence: str, expected: list[tuple[str, str, str, bool, bool]]
) -> None:
    got = [(r.subject, r.type, r.obj, r.starts, r.ended) for r in read_relations(sentence)]
    assert got == expected


def test_an_abbreviation_does_not_end_the_sentence() -> None:
    s = conv("s1", date(2023, 5, 8), ("Elizabeth", "I started a new job at St. Mary's Hospital."))
    (st,) = extract_session(s).statements
    assert st.obj == "St Mary's Hospital"


def test_first_person_plural_is_less_certain() -> None:
    (i,) = read_relations("I moved to Rome.")
    (we,) = read_relations("We moved to Rome.")
    assert we.confidence < i.confidence


def test_session_extract_speakers_dates_and_statements() -> None:
    s = conv(
        "s1",
        date(2023, 5, 8),
        ("Melanie", "Hi Caroline! I moved to Paris last month."),
        ("Caroline", "Wow, Mel! I used to live in Lyon. My sister Anna is visiting."),
    )
    ex = extract_session(s, recorded_at=1.0)
    assert ex.speakers == ("Melanie", "Caroline")
    assert ex.at == s.events[0].timestamp and ex.recorded_at == 1.0
    speakers = {m.surface for m in ex.mentions if m.speaker}
    assert speakers == {"Melanie", "Caroline"}
    dates = [(m.surface, m.type) for m in ex.mentions if m.type in ("date", "period")]
    assert dates == [("2023-04", "period")]
    by_type = {st.type + ":" + st.subject: st for st in ex.statements}
    moved = by_type["lives_in:Melanie"]
    assert (moved.obj, to_date(moved.valid_from), moved.valid_to) == (
        "Paris",
        date(2023, 4, 1),
        None,
    )
    lyon = by_type["lives_in:Caroline"]
    assert lyon.obj == "Lyon" and lyon.ended and lyon.valid_to == s.events[1].timestamp
    assert by_type["sister_of:Anna"].obj == "Caroline"
    assert moved.event_id == "s1-0" and "Paris" in moved.evidence


def test_a_fact_stated_without_a_date_holds_from_when_it_was_said() -> None:
    s = conv("s1", date(2023, 5, 8), ("Melanie", "I work at Acme Labs."))
    (st,) = extract_session(s).statements
    assert st.valid_from == s.events[0].timestamp and st.valid_to is None


def test_a_date_beside_a_state_dates_something_else() -> None:
    # Said on a Sunday: "Thursday" is when the plan is, not when Lena became a sister.
    s = conv("s1", date(2026, 1, 11), ("Melanie", "I'll make it on Thursday for my sister Lena."))
    (st,) = [st for st in extract_session(s).statements if st.type == "sister_of"]
    assert st.valid_from == s.events[0].timestamp and st.valid_to is None
    # A verb that says the fact began then keeps the date.
    s = conv("s2", date(2026, 5, 11), ("Melanie", "I moved to Porto in March."))
    (moved,) = extract_session(s).statements
    assert to_date(moved.valid_from) == date(2026, 3, 1)


def test_until_and_since_bound_the_validity() -> None:
    s = conv(
        "s1",
        date(2023, 5, 8),
        ("Melanie", "I lived in Rome until 2019."),
        ("Caroline", "I have worked at Acme since 2020."),
    )
    rome, acme = extract_session(s).statements
    assert rome.valid_to == epoch(date(2019, 1, 1)) and rome.ended
    assert acme.valid_from == epoch(date(2020, 1, 1)) and not acme.ended


def test_an_agents_first_person_is_not_a_person_of_the_users_world() -> None:
    s = Session(
        "app",
        "u1",
        session_id="s",
        events=[
            Event(
                author="travel_agent",
                role="model",
                text="I live in the cloud, in Frankfurt.",
                id="e1",
                timestamp=epoch(date(2023, 1, 1)),
            )
        ],
    )
    assert extract_session(s).statements == ()


def test_sentence_initial_words_seen_nowhere_else_are_weak() -> None:
    s = conv(
        "s1",
        date(2023, 5, 8),
        ("Melanie", "Went hiking. Boston was cold."),
        ("Caroline", "I love Boston."),
    )
    weak = {m.surface for m in extract_session(s).mentions if m.initial_only}
    assert "Went" in weak and "Boston" not in weak


def test_memories_are_kept_with_their_events() -> None:
    s = conv("s1", date(2023, 5, 8), ("Melanie", "I moved to Paris."), ("Caroline", "Nice!"))
    memories = distill_session(s, None, summarize=False, chunk_turns=2, now=0)
    ex = extract_session(s, memories)
    assert [m.memory_id for m in ex.memories] == [m.memory_id for m in memories]
    assert ex.memories[0].event_ids == ("s1-0", "s1-1")


def test_extraction_is_deterministic() -> None:
    s = conv("s1", date(2023, 5, 8), ("Melanie", "I moved to Paris last month, Caroline."))
    assert extract_session(s, recorded_at=5) == extract_session(s, recorded_at=5)
