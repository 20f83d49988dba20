"""Time expressions resolved against fixed reference dates, and the time intent of questions."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from mnemoray.errors import InvalidInput
from mnemoray.temporal import epoch, is_vague, resolve_times, time_intent, to_date

MONDAY = "2023-05-08"  # a Monday: weeks run Monday to Sunday


def labels(text: str, ref: str = MONDAY) -> list[tuple[str, str]]:
    return [(s.text, s.label) for s in resolve_times(text, ref)]


def one(text: str, ref: str = MONDAY) -> tuple[date, date, str]:
    spans = resolve_times(text, ref)
    assert len(spans) == 1, spans
    s = spans[0]
    return to_date(s.start), to_date(s.end), s.granularity


@pytest.mark.parametrize(
    "text",
    ["May 7, 2023", "May 7th, 2023", "7 May 2023", "7th of May 2023", "2023-05-07", "2023/05/07"],
)
def test_absolute_dates_name_the_day(text: str) -> None:
    assert one(f"We met on {text}.") == (date(2023, 5, 7), date(2023, 5, 8), "day")
    assert resolve_times(text, MONDAY)[0].relative is False


def test_span_text_and_offsets_are_what_was_read() -> None:
    text = "Back on May 7, 2023 we met."
    (span,) = resolve_times(text, MONDAY)
    assert text[span.begin : span.end_char] == span.text == "May 7, 2023"
    assert span.contains(epoch(date(2023, 5, 7)) + 3600)
    assert not span.contains(epoch(date(2023, 5, 8)))


def test_month_and_year_forms() -> None:
    assert one("in March") == (date(2023, 3, 1), date(2023, 4, 1), "month")
    assert one("in May 2021") == (date(2021, 5, 1), date(2021, 6, 1), "month")
    assert one("since 2019") == (date(2019, 1, 1), date(2020, 1, 1), "year")
    assert one("back in the 90s")[:2] == (date(1990, 1, 1), date(2000, 1, 1))
    assert one("the summer of 2021") == (date(2021, 6, 1), date(2021, 9, 1), "season")
    assert not any(s.relative for s in resolve_times("in May 2021, summer of 2021", MONDAY))


def test_a_date_without_a_year_takes_the_nearest_year_past_first() -> None:
    assert one("on June 3", ref="2023-05-08")[0] == date(2023, 6, 3)  # a few weeks ahead
    assert one("on December 20", ref="2023-05-08")[0] == date(2022, 12, 20)
    assert one("in January", ref="2023-12-15")[0] == date(2024, 1, 1)  # planning ahead


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("yesterday", date(2023, 5, 7), date(2023, 5, 8), "day"),
        ("today", date(2023, 5, 8), date(2023, 5, 9), "day"),
        ("the day before yesterday", date(2023, 5, 6), date(2023, 5, 7), "day"),
        ("last Saturday", date(2023, 5, 6), date(2023, 5, 7), "day"),
        ("on Monday", date(2023, 5, 1), date(2023, 5, 2), "day"),  # the one before, not today
        ("next Friday", date(2023, 5, 12), date(2023, 5, 13), "day"),
        ("last week", date(2023, 5, 1), date(2023, 5, 8), "week"),
        ("next week", date(2023, 5, 15), date(2023, 5, 22), "week"),
        ("last weekend", date(2023, 5, 6), date(2023, 5, 8), "weekend"),
        ("two weeks ago", date(2023, 4, 24), date(2023, 5, 1), "week"),
        ("two months ago", date(2023, 3, 1), date(2023, 4, 1), "month"),
        ("a month ago", date(2023, 4, 1), date(2023, 5, 1), "month"),
        ("3 years ago", date(2020, 1, 1), date(2021, 1, 1), "year"),
        ("last May", date(2022, 5, 1), date(2022, 6, 1), "month"),  # said in May: the one before
        ("next month", date(2023, 6, 1), date(2023, 7, 1), "month"),
        ("last year", date(2022, 1, 1), date(2023, 1, 1), "year"),
        ("this summer", date(2023, 6, 1), date(2023, 9, 1), "season"),
        ("last summer", date(2022, 6, 1), date(2022, 9, 1), "season"),
        ("last winter", date(2022, 12, 1), date(2023, 3, 1), "season"),
        ("earlier this year", date(2023, 1, 1), date(2023, 5, 9), "range"),
    ],
)
def test_relative_expressions(text: str, start: date, end: date, granularity: str) -> None:
    assert one(text) == (start, end, granularity)
    assert resolve_times(text, MONDAY)[0].relative is True


def test_last_may_said_after_may_is_this_years() -> None:
    assert one("last May", ref="2023-06-12")[0] == date(2023, 5, 1)


def test_vague_counts_give_a_range() -> None:
    start, end, granularity = one("a few days ago")
    assert (start, end, granularity) == (date(2023, 5, 4), date(2023, 5, 7), "range")


def test_the_week_before_is_anchored_on_the_date_after_it_else_before_else_the_reference() -> None:
    week = resolve_times("the week before May 7, 2023", MONDAY)[0]
    assert (to_date(week.start), week.label) == (date(2023, 4, 24), "2023-W17")
    narrated = resolve_times("We were in Rome in June 2022 and the week before in Paris.", MONDAY)
    assert [s.label for s in narrated] == ["2022-06", "2022-W21"]
    alone = resolve_times("the week before", MONDAY)[0]
    assert to_date(alone.start) == date(2023, 5, 1)


@pytest.mark.parametrize(
    "text",
    [
        "I saw her recently",
        "a while ago",
        "lately it rains",
        "the other day",
        "May I ask?",
        "summer camp was fun",
        "I fall asleep",
        "We have 2000 dollars",
    ],
)
def test_vague_or_no_time_resolves_to_nothing(text: str) -> None:
    assert resolve_times(text, MONDAY) == []


def test_is_vague() -> None:
    assert is_vague("we spoke recently") and not is_vague("we spoke last week")


def test_several_expressions_in_text_order_longest_reading_wins() -> None:
    got = labels("Yesterday I booked flights for next month; we met in May 2021.")
    assert got == [
        ("Yesterday", "2023-05-07"),
        ("next month", "2023-06"),
        ("in May 2021", "2021-05"),
    ]


def test_the_reference_may_be_epoch_seconds_datetime_date_or_iso() -> None:
    dt = datetime(2023, 5, 8, 22, 30, tzinfo=timezone.utc)
    for ref in (dt, dt.timestamp(), date(2023, 5, 8), "2023-05-08T22:30:00Z"):
        assert labels("yesterday", ref) == [("yesterday", "2023-05-07")]
    with pytest.raises(InvalidInput) as err:
        resolve_times("yesterday", "not a date")
    assert err.value.field == "reference"


def test_resolution_is_deterministic() -> None:
    text = "Last Saturday, two months ago and this summer."
    assert resolve_times(text, MONDAY) == resolve_times(text, MONDAY)


@pytest.mark.parametrize(
    "question",
    [
        "When did Melanie adopt Max?",
        "What year did they move?",
        "How long ago was the wedding?",
        "Since when has she worked there?",
        "Which month did Caroline start?",
    ],
)
def test_when_questions(question: str) -> None:
    intent = time_intent(question)
    assert intent.asks_when and intent.temporal and intent.cues


@pytest.mark.parametrize(
    "question",
    [
        "Where did I live before Berlin?",
        "What did Mel use to do for work?",
        "Where did she work previously?",
        "What was my old job?",
        "Earlier, what car did I own?",
    ],
)
def test_questions_about_the_past(question: str) -> None:
    intent = time_intent(question)
    assert intent.about_past and not intent.asks_when


def test_plain_questions_have_no_time_intent() -> None:
    intent = time_intent("What is Melanie's favourite book?")
    assert not intent.temporal and intent.spans == () and intent.cues == ()


def test_question_periods_resolve_against_the_reference_when_given() -> None:
    assert [s.label for s in time_intent("What did we do last May?", "2023-06-12").spans] == [
        "2023-05"
    ]
    # Without a date to stand on, only absolute periods are read.
    assert time_intent("What did we do last May?").spans == ()
    assert [s.label for s in time_intent("What happened in May 2023?").spans] == ["2023-05"]
