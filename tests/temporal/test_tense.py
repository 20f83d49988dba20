"""A date said without its year follows the tense of its clause (mnemoray.temporal.tense):
"I started in June" said in May is last June, "we will fly out in March" next March."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from mnemoray.temporal import resolve_times
from mnemoray.temporal.tense import clause_around, lean_at

SAID = datetime(2024, 5, 15, tzinfo=timezone.utc).timestamp()  # a Wednesday
DECEMBER = datetime(2026, 12, 1, 12, tzinfo=timezone.utc).timestamp()


def _first(text: str) -> date:
    (span,) = resolve_times(text, SAID)
    return datetime.fromtimestamp(span.start, timezone.utc).date()


@pytest.mark.parametrize(
    ("text", "start"),
    [
        # Months: past tense -> the last one begun; future -> the next one not over.
        ("I started a new job in June.", date(2023, 6, 1)),
        ("Will and I went hiking in June.", date(2023, 6, 1)),
        ("My sister visited us in June.", date(2023, 6, 1)),
        ("We will fly out in March.", date(2025, 3, 1)),
        ("I'm moving to Lisbon in March.", date(2025, 3, 1)),
        ("We're going to Oslo in May.", date(2024, 5, 1)),  # this month is not over yet
        ("I moved here in May.", date(2024, 5, 1)),  # this month has begun
        ("Since June I have been running.", date(2023, 6, 1)),  # "since": begun already
        # Neither (or both): the nearest, the past preferred, as before.
        ("I start the new job in June.", date(2024, 6, 1)),
        ("I'm excited about our trip in June.", date(2024, 6, 1)),
        ("I need a break in March.", date(2024, 3, 1)),
        ("We went to Rome and will go back in March.", date(2025, 3, 1)),  # its own clause
        ("We went to Rome, and will go back in March.", date(2025, 3, 1)),
        ("I moved to Rome, it was great and I will stay in March.", date(2025, 3, 1)),
        # Dates without a year.
        ("I saw her on June 3.", date(2023, 6, 3)),
        ("I will see her on June 3.", date(2024, 6, 3)),
        ("I will see her on March 3.", date(2025, 3, 3)),
        # Weekdays: the coming one when the sentence looks ahead.
        ("We are flying out on Saturday.", date(2024, 5, 18)),
        ("We went out on Saturday.", date(2024, 5, 11)),
        ("Saturday was fun.", date(2024, 5, 11)),
        ("We'll meet on Wednesday.", date(2024, 5, 22)),  # said on a Wednesday: next week's
        ("We will meet last Saturday.", date(2024, 5, 11)),  # "last" says it
        ("I'll send you the photos from this past Saturday.", date(2024, 5, 11)),
        # Seasons.
        ("We will go hiking in the summer.", date(2024, 6, 1)),
        ("We will go skiing in the winter.", date(2024, 12, 1)),
        ("We went hiking in the winter.", date(2023, 12, 1)),
        ("We went hiking in the summer.", date(2023, 6, 1)),
    ],
)
def test_a_year_less_date_follows_its_sentence(text: str, start: date) -> None:
    assert _first(text) == start


# What another clause, a phrase of its own or a word that only looks like a cue says does
# not move the date: each stays where the nearest-year rule puts it.
@pytest.mark.parametrize(
    "text",
    [
        "I booked a hotel for our trip in August.",
        "I bought tickets for the concert in July.",
        "I just booked our flights for June 3.",
        "So excited for our trip in June!",
        "Really excited about the wedding in June.",
        "Very interested in the course in July.",
        "I'll never forget our trip to Rome in March.",
        "I won't forget the concert in March.",
        "I'm slowly recovering from the surgery in April.",
        "I'm feeling better after the surgery in April.",
        "She's amazing, her recital in March blew me away.",
        "I'm thinking about the concert in March.",
        "We kept going to the beach in March.",
        "I registered for the course in September.",
        "Anna mentioned the deadline is in July.",
        "I'll send you the photos from our hike on Saturday.",
    ],
)
def test_cues_outside_the_clause_change_nothing(text: str) -> None:
    (span,) = resolve_times(text, SAID)
    from mnemoray.temporal import expressions

    lean = expressions.lean_at
    try:
        expressions.lean_at = lambda *_: None  # the rule before: the nearest year
        (plain,) = resolve_times(text, SAID)
    finally:
        expressions.lean_at = lean
    assert (span.start, span.end) == (plain.start, plain.end)


def test_only_the_clause_of_the_date_counts() -> None:
    # The cue of the other sentence says nothing of this date.
    assert _first("We went to Rome with Anna. I start the new job in June.") == date(2024, 6, 1)
    assert _first("We will see. I started the job in June.") == date(2023, 6, 1)
    text = "We moved. Then: I will fly out in March! And more."
    i = text.index("in March")
    assert clause_around(text, i, i + 8) == " I will fly out in March"
    text = "I booked a hotel for our trip in August."
    i = text.index("in August")
    assert clause_around(text, i, i + 9) == "our trip in August"


@pytest.mark.parametrize(
    ("sentence", "lean"),
    [
        ("I moved to Lisbon in March.", "past"),
        ("It was great in March.", "past"),
        ("Two weeks ago in March.", "past"),
        ("We've got plans in March.", None),
        ("I'll be there in March.", "future"),
        ("She is planning to go in March.", "future"),
        ("The flight is booked for March.", None),
        ("", None),
    ],
)
def test_lean(sentence: str, lean: str | None) -> None:
    assert lean_at(sentence, 0, len(sentence)) == lean


def test_years_and_qualifiers_are_unchanged() -> None:
    assert _first("I started a new job in June 2022.") == date(2022, 6, 1)
    assert _first("We will fly out next March.") == date(2025, 3, 1)
    assert _first("We went out last March.") == date(2024, 3, 1)
    assert _first("I will fly out this March.") == date(2024, 3, 1)


@pytest.mark.parametrize(
    "question",
    [
        "What did we talk about on January 11?",
        "what did I say about the trip on Jan 11?",
        "Did you book anything for January 11?",
        "When was I at the dentist, January 11?",
    ],
)
def test_a_question_asked_in_the_past_asks_about_the_past(question: str) -> None:
    # Asked in December, the nearest January 11 is ahead; the question's "did" says
    # which one it means.
    (span,) = resolve_times(question, DECEMBER)
    assert datetime.fromtimestamp(span.start, timezone.utc).date() == date(2026, 1, 11)


@pytest.mark.parametrize(
    "text",
    [
        "What will we do on January 11?",
        "What are we doing on January 11?",
        "We talked about it. What is planned for January 11?",
        "I did it. The party is on January 11.",
    ],
)
def test_a_question_not_asked_in_the_past_keeps_the_nearest_year(text: str) -> None:
    (span,) = resolve_times(text, DECEMBER)
    assert datetime.fromtimestamp(span.start, timezone.utc).date() == date(2027, 1, 11)
