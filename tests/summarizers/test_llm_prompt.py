"""The shared LLM prompt and the parser, on realistic model outputs."""

from __future__ import annotations

import json

import pytest

from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.summarizers.base import Fact
from mnemoray.summarizers.errors import SummaryParseError
from mnemoray.summarizers.llm_prompt import (
    SUMMARY_JSON_SCHEMA,
    build_messages,
    build_prompt,
    citable_event_ids,
    extract_json_object,
    parse_summary,
    parse_summary_report,
    render_transcript,
)

T0 = 1_735_725_600  # 2025-01-01 10:00 UTC


@pytest.fixture
def events() -> list[Event]:
    call = tool_call(
        "travel_agent", "search_flights", {"to": "Lisbon", "max_price": 300}, timestamp=T0 + 20
    )
    return [
        user_message("I'm vegetarian and I want to visit Lisbon in May.", timestamp=T0),  # e0
        model_message("travel_agent", "Great choice!\nLet me look.", timestamp=T0 + 10),  # e1
        call,  # e2
        tool_result(
            "search_flights", "search_flights", {"flights": 2}, call.call_id, timestamp=T0 + 30
        ),  # e3
        Event(author="user", text="Lis", partial=True, timestamp=T0 + 35),  # skipped
        Event(author="system", role="system", type="control", timestamp=T0 + 36),  # skipped
        user_message("Book the cheaper one, my budget is tight.", timestamp=T0 + 40),  # e6
    ]


def test_transcript_numbers_lines_by_position_and_skips_partial_and_control(events):
    lines = render_transcript(events).splitlines()
    assert lines == [
        "[e0] user (2025-01-01 10:00): I'm vegetarian and I want to visit Lisbon in May.",
        "[e1] model:travel_agent (2025-01-01 10:00): Great choice! Let me look.",
        "[e2] model:travel_agent (2025-01-01 10:00): called search_flights("
        '{"max_price": 300, "to": "Lisbon"})',
        '[e3] tool:search_flights (2025-01-01 10:00): search_flights returned {"flights": 2}',
        "[e6] user (2025-01-01 10:00): Book the cheaper one, my budget is tight.",
    ]
    assert citable_event_ids(events) == {i: events[i].id for i in (0, 1, 2, 3, 6)}


def test_transcript_clips_long_events_and_renders_errors_and_compactions():
    long = user_message("word " * 1000, timestamp=T0)
    err = Event(
        author="travel_agent", role="model", type="error", text="quota exceeded", timestamp=T0
    )
    comp = Event(
        author="system",
        role="system",
        type="compaction",
        text="User likes trains.",
        data={"start_ts": 0.0, "end_ts": 1.0},
        timestamp=T0,
    )
    lines = render_transcript([long, err, comp], max_event_chars=50).splitlines()
    assert lines[0].endswith("…") and len(lines[0].split(": ", 1)[1]) == 50
    assert lines[1].endswith("): error: quota exceeded")
    assert lines[2] == (
        "[e2] system (2025-01-01 10:00): summary of earlier events: User likes trains."
    )


def test_prompt_holds_transcript_and_schema(events):
    prompt = build_prompt(events)
    assert render_transcript(events) in prompt
    for key in SUMMARY_JSON_SCHEMA["required"]:
        assert f'"{key}"' in prompt
    assert build_messages(events) == [{"role": "user", "content": prompt}]
    with pytest.raises(ValueError, match="nothing to summarize: all 2 events"):
        build_prompt([events[4], events[5]])


def test_plain_json_maps_citations_to_event_ids(events):
    raw = json.dumps(
        {
            "summary": "User plans a vegetarian-friendly Lisbon trip in May on a tight budget.",
            "topics": ["travel", "Lisbon", "travel"],
            "key_facts": [
                {"text": "User is vegetarian", "events": [0]},
                {"text": "User is on a tight budget", "events": [6, 3]},
            ],
            "entities": ["Lisbon"],
            "open_threads": ["Confirm the cheaper flight booking"],
        }
    )
    summary = parse_summary(raw, events)
    assert summary.key_facts == (
        Fact("User is vegetarian", (events[0].id,)),
        Fact("User is on a tight budget", (events[6].id, events[3].id)),
    )
    assert summary.topics == ("travel", "Lisbon")  # duplicates dropped
    assert summary.entities == ("Lisbon",)
    assert summary.open_threads == ("Confirm the cheaper flight booking",)
    assert summary.source_event_ids == tuple(events[i].id for i in (0, 1, 2, 3, 6))


def test_fenced_json_with_prose_and_braces_around_it(events):
    raw = (
        "Sure! Here is the memory {as requested}:\n\n```json\n"
        '{"summary": "User wants Lisbon.", "topics": ["travel"], '
        '"key_facts": [{"text": "Wants to visit Lisbon in May", "events": [0]}], '
        '"entities": [], "open_threads": []}\n```\nLet me know if you need more.'
    )
    summary = parse_summary(raw, events)
    assert summary.summary == "User wants Lisbon."
    assert summary.key_facts == (Fact("Wants to visit Lisbon in May", (events[0].id,)),)


def test_reasoning_preamble_is_ignored(events):
    raw = (
        '<think>The user said {vegetarian}. Output {"summary": "draft"}?</think>\n'
        '{"summary": "Final.", "key_facts": [{"text": "Vegetarian", "events": [0]}]}'
    )
    summary = parse_summary(raw, events)
    assert summary.summary == "Final."
    assert summary.key_facts[0].source_event_ids == (events[0].id,)


def test_trailing_commas_single_quotes_and_python_literals(events):
    raw = """{
      'summary': 'The user's trip to Lisbon: "cheap" flights only',
      'topics': ['travel', 'budget',],
      'key_facts': [{'text': 'User\\'s diet is vegetarian', 'events': [0,],},],
      'entities': ['Lisbon'],
      'open_threads': None,
    }"""
    summary = parse_summary(raw, events)
    assert summary.summary == 'The user\'s trip to Lisbon: "cheap" flights only'
    assert summary.topics == ("travel", "budget")
    assert summary.key_facts == (Fact("User's diet is vegetarian", (events[0].id,)),)
    assert summary.open_threads == ()


def test_bad_citations_are_dropped_and_counted(events):
    raw = json.dumps(
        {
            "summary": "Trip planning [e0] for Lisbon [e6].",
            "keyFacts": [  # camelCase, as some prompts in the wild ask for
                {"text": "Vegetarian", "events": ["e0", "[e99]", 4]},  # e4 is a partial event
                {"text": "Budget is tight", "events": [99]},  # nothing valid left: dropped
                {"text": "Prefers May", "events": []},  # uncited: dropped
                "Wants the cheaper flight [e6]",  # inline citation
                {"text": "Going to Lisbon [e0]", "events": "e6"},
                {"text": "", "events": [0]},  # no text: dropped
                {"text": "Bool is not an index", "events": [True]},
            ],
            "entities": [{"name": "Lisbon", "type": "city"}, "lisbon", 7],
        }
    )
    report = parse_summary_report(raw, events)
    assert report.summary.key_facts == (
        Fact("Vegetarian", (events[0].id,)),
        Fact("Wants the cheaper flight", (events[6].id,)),
        Fact("Going to Lisbon", (events[6].id, events[0].id)),
    )
    assert report.dropped_facts == 4
    assert report.dropped_citations == 4  # e99, 4, 99, True
    assert report.summary.entities == ("Lisbon", "7")
    assert report.summary.summary == "Trip planning for Lisbon."


def test_nested_fact_alone_is_not_taken_for_a_summary(events):
    assert extract_json_object('{"text": "Vegetarian", "events": [0]}') is None
    with pytest.raises(SummaryParseError, match="no summary JSON object"):
        parse_summary('Facts: {"text": "Vegetarian", "events": [0]}', events)


def test_unrecoverable_output_raises_with_excerpt(events):
    with pytest.raises(
        SummaryParseError,
        match=r"no summary JSON object in model output of "
        r"\d+ chars: 'The user talked about",
    ):
        parse_summary("The user talked about Lisbon and food. " * 20, events)
    with pytest.raises(SummaryParseError, match="looks truncated"):
        parse_summary('{"summary": "User plans a trip", "topics": ["tra', events)
    with pytest.raises(SummaryParseError, match="no non-empty 'summary'"):
        parse_summary('{"summary": "  ", "topics": ["travel"]}', events)
    with pytest.raises(SummaryParseError, match="no non-empty 'summary'"):
        parse_summary('{"topics": ["travel"]}', events)
