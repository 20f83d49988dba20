"""Compaction events in the history: replacement, overlap, tool-pair boundaries."""

from __future__ import annotations

import pytest

from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.compiler import AgentSpec, Compiler
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.summarizers import ExtractiveSummarizer
from mnemoray.summarizers.base import Summary

PREFIX = "[Summary of earlier conversation]: "


def compaction(
    text: str, covered: list[Event], *, event_id: str, with_ids: bool = True, ts: float = 100.0
) -> Event:
    summary = Summary(summary=text, source_event_ids=tuple(e.id for e in covered))
    data = {
        "start_ts": covered[0].timestamp,
        "end_ts": covered[-1].timestamp,
        "summary": summary.to_dict(),
    }
    if with_ids:
        data["source_event_ids"] = [e.id for e in covered]
    return Event(
        author="compactor",
        role="system",
        type="compaction",
        text=text,
        data=data,
        id=event_id,
        timestamp=ts,
    )


def turns(n: int) -> list[Event]:
    events = []
    for i in range(n):
        events.append(user_message(f"question {i}", id=f"u{i}", timestamp=2 * i + 1.0))
        events.append(model_message("alpha", f"answer {i}", id=f"a{i}", timestamp=2 * i + 2.0))
    return events


def history(session, **kw):
    req = Compiler.default().compile(session, AgentSpec(name="alpha"), **kw)
    return req, [c.event_ids[0] if c.event_ids else None for c in req.contents]


def test_compaction_replaces_the_events_it_covers(make_session):
    events = turns(4)
    session = make_session(
        *events, compaction("Dana asked about 0 and 1.", events[:4], event_id="c1")
    )
    req, ids = history(session, new_message="next")
    assert ids == ["c1", "u2", "a2", "u3", "a3", None]
    assert req.contents[0].role == "user"
    assert req.contents[0].text == PREFIX + "Dana asked about 0 and 1."
    step = next(s for s in req.trace if s.name == "history")
    assert step.detail["compactions"] == ["c1"]
    assert step.detail["covered_by_compaction"] == 4


def test_compaction_contained_in_a_later_one_is_dropped(make_session):
    events = turns(4)
    session = make_session(
        *events,
        compaction("first two", events[:4], event_id="small"),
        compaction("first three", events[:6], event_id="big"),
    )
    req, ids = history(session)
    assert ids == ["big", "u3", "a3"]
    step = next(s for s in req.trace if s.name == "history")
    assert step.detail["skipped"]["superseded_compactions"] == 1


def test_overlapping_compactions_both_stay_ordered_by_start(make_session):
    events = turns(4)
    late = compaction("turns 1-2", events[2:6], event_id="late")
    early = compaction("turns 0-1", events[0:4], event_id="early")
    # Appended out of order: the rendering still follows their start.
    session = make_session(*events, late, early)
    _, ids = history(session)
    assert ids == ["early", "late", "u3", "a3"]


def test_without_source_ids_the_time_window_is_covered(make_session):
    events = turns(3)
    session = make_session(*events, compaction("window", events[:2], event_id="c", with_ids=False))
    _, ids = history(session)
    assert ids == ["c", "u1", "a1", "u2", "a2"]


def test_summary_text_falls_back_to_the_summary_data(make_session):
    events = turns(2)
    event = compaction("from data", events[:2], event_id="c")
    event = Event(**{**event.to_dict(), "text": ""})
    req, _ = history(make_session(*events, event))
    assert req.contents[0].text == PREFIX + "from data"


def test_a_covered_call_stays_raw_when_its_result_is_not_covered(make_session):
    u = user_message("export my data", id="u", timestamp=1.0)
    call = tool_call("alpha", "export", {"fmt": "csv"}, call_id="x", id="call", timestamp=2.0)
    m = model_message("alpha", "Working on it.", id="m", timestamp=3.0)
    result = tool_result("alpha", "export", {"rows": 10}, call_id="x", id="result", timestamp=4.0)
    session = make_session(
        u, call, m, compaction("asked for export", [u, call, m], event_id="c"), result
    )
    req, ids = history(session)
    assert ids == ["c", "call", "result"]
    assert req.contents[1].parts[0].function_call.id == "x"
    assert req.contents[2].parts[0].function_response.id == "x"


def test_a_covered_result_stays_raw_when_its_call_is_not_covered(make_session):
    # Sources need not be contiguous: the compactor summarised around a call.
    u = user_message("export", id="u", timestamp=1.0)
    call = tool_call("alpha", "export", {}, call_id="x", id="call", timestamp=2.0)
    result = tool_result("alpha", "export", {"rows": 1}, call_id="x", id="result", timestamp=3.0)
    m = model_message("alpha", "Done.", id="m", timestamp=4.0)
    session = make_session(u, call, result, m, compaction("exported", [u, result, m], event_id="c"))
    _, ids = history(session)
    assert ids == ["c", "call", "result"]


def test_covered_pairs_and_uncovered_pairs(make_session):
    events = [
        user_message("q", id="u", timestamp=1.0),
        tool_call("alpha", "t", {}, call_id="1", id="call1", timestamp=2.0),
        tool_result("alpha", "t", {}, call_id="1", id="res1", timestamp=3.0),
        tool_call("alpha", "t", {}, call_id="2", id="call2", timestamp=4.0),
        tool_result("alpha", "t", {}, call_id="2", id="res2", timestamp=5.0),
    ]
    session = make_session(*events, compaction("c", events[:3], event_id="c"))
    _, ids = history(session)
    assert ids == ["c", "call2", "res2"]  # a fully covered pair goes into the summary


@pytest.mark.parametrize(
    "config",
    [
        CompactionConfig(interval=2, overlap=1),
        CompactionConfig(token_threshold=20),
        CompactionConfig(boundaries=("phrase",)),
    ],
    ids=["interval", "token_threshold", "phrase"],
)
def test_after_a_compaction_the_newest_turns_stay_raw(config: CompactionConfig):
    """The last turns in full, older ones summarized, whatever the trigger. Every event
    is either raw in the contents or covered by a summary shown there, never both."""
    store = InMemorySessionStore()
    session = store.create_session("app", "u1", "s1")
    compactor = Compactor(ExtractiveSummarizer(), config)
    for n in range(8):  # compacted after every invocation, as an agent runner would
        ask = f"Let's move on to question {n}" if n % 4 == 0 else f"question {n}"
        store.append_events(
            session,
            [
                user_message(ask, id=f"u{n}", invocation_id=f"i{n}"),
                model_message("alpha", f"answer {n}", id=f"a{n}", invocation_id=f"i{n}"),
            ],
        )
        while compactor.maybe_compact(store, session) is not None:
            pass
    req, ids = history(session, new_message="next")
    shown = [e for e in session.events if e.type == "compaction" and e.id in ids]
    assert shown  # it did compact
    assert ids[-3:] == ["u7", "a7", None]  # the newest invocation, then the new message
    kept = [i for n in range(8 - config.keep_last, 8) for i in (f"u{n}", f"a{n}")]
    assert ids[-len(kept) - 1 :] == [*kept, None]
    covered = {i for c in shown for i in c.data["source_event_ids"]}
    assert not covered & set(kept)
    raw = {i for i in ids if i not in {c.id for c in shown}}
    for event in session.events:
        if event.type == "message":
            assert (event.id in raw) != (event.id in covered), event.id
