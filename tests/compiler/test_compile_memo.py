"""The history memo: what it reuses, when it starts over, and its bound. That the
output never changes is tests/compiler/test_compile_pinned.py's job."""

from __future__ import annotations

import json

from mnemoray.compiler.history_memo import HistoryMemo
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message


def reloaded(events: list[Event]) -> list[Event]:
    return [Event.from_dict(e.to_dict()) for e in events]


def test_same_or_equal_events_reuse_the_view(make_session):
    memo = HistoryMemo()
    session = make_session(user_message("hi", id="u"), model_message("alpha", "hello", id="m"))
    first = memo.view(session, "alpha", "default")
    assert memo.view(session, "alpha", "default") is first
    session.events = reloaded(session.events)  # as loaded from a store
    assert memo.view(session, "alpha", "default") is first
    assert memo.view(session, "beta", "default") is not first  # another point of view


def test_a_grown_session_renders_only_its_new_events(make_session):
    memo = HistoryMemo()
    session = make_session(user_message("hi", id="u"), model_message("alpha", "hello", id="m"))
    first = memo.view(session, "alpha", "default")
    session.apply(user_message("more", id="u2"))
    grown = memo.view(session, "alpha", "default")
    assert grown.event_ids == ["u", "m", "u2"]
    assert all(a is b for a, b in zip(first.contents, grown.contents[:2], strict=True))


def test_an_edited_log_or_a_late_tool_call_starts_over(make_session):
    memo = HistoryMemo()
    session = make_session(
        user_message("hi", id="u"), tool_result("search", "search", {"n": 1}, call_id="c", id="r")
    )
    assert memo.view(session, "alpha", "default").contents[1].role == "user"  # narrative
    # The call arrives after its result: the result is alpha's own from now on.
    session.apply(tool_call("alpha", "search", {"q": "x"}, call_id="c", id="call"))
    view = memo.view(session, "alpha", "default")
    assert view.contents[1].parts[0].function_response is not None
    session.events = [user_message("bye", id="u"), *session.events[1:]]  # same id, new text
    assert memo.view(session, "alpha", "default").contents[0].text == "bye"


def test_the_memo_is_bounded_by_the_events_it_holds(make_session):
    memo = HistoryMemo(max_events=5)
    for sid in ("a", "b"):
        memo.view(
            make_session(*(user_message(f"m{i}") for i in range(3)), session_id=sid),
            "alpha",
            "default",
        )
    assert len(memo) == 1  # the first session's snapshot went
    memo.view(
        make_session(*(user_message(f"m{i}") for i in range(6)), session_id="c"), "alpha", "default"
    )
    assert len(memo) == 1  # one over the bound is never stored


def test_to_json_matches_the_json_module():
    from decimal import Decimal

    from mnemoray.compiler.casting import to_json

    payloads = [
        {"b": 1, "a": [1.5, -0.0, 1e300, None, True, 'é " \\ \n \t \u0001 東京']},
        {"nested": {"z": {}, "y": [], "x": [{"k": 2**70}]}},
        {3: "int keys", 1: 2},
        "plain text",
        42,
        2.5,
        None,
        [],
        {"odd": Decimal("1.10")},
    ]
    for payload in payloads:
        assert to_json(payload) == json.dumps(
            payload, ensure_ascii=False, sort_keys=True, default=str
        )


def big_session(make_session, sid: str, words: int = 2000):
    """One large tool result, as a session with a big payload holds."""
    return make_session(
        user_message("look it up", id="u"),
        tool_call("alpha", "fetch", {"q": "x"}, call_id="c", id="call"),
        tool_result("alpha", "fetch", {"body": "word " * words}, call_id="c", id="r"),
        session_id=sid,
    )


def test_the_memo_is_bounded_by_the_tokens_it_holds(make_session):
    size = HistoryMemo().view(big_session(make_session, "probe"), "alpha", "default").tokens
    assert size > 2000
    memo = HistoryMemo(max_tokens=2 * size + size // 2)
    sessions = [big_session(make_session, sid) for sid in ("a", "b", "c")]
    views = [memo.view(s, "alpha", "default") for s in sessions]
    assert len(memo) == 2 and memo.tokens == 2 * size  # "a", the oldest, went
    assert memo.view(sessions[2], "alpha", "default") is views[2]
    assert memo.view(sessions[0], "alpha", "default") is not views[0]
    memo.clear()
    assert memo.tokens == 0 and len(memo) == 0


def test_a_snapshot_over_the_entry_cap_is_not_kept(make_session):
    session = big_session(make_session, "a")
    whole = HistoryMemo().view(session, "alpha", "default")
    memo = HistoryMemo(max_entry_tokens=whole.tokens - 1)
    view = memo.view(session, "alpha", "default")
    assert view == whole and len(memo) == 0 and memo.tokens == 0  # same output, not kept
    # A session kept below the cap that grows past it keeps its last snapshot, which
    # the next compile still extends.
    small = make_session(user_message("hi", id="u0"), session_id="b")
    memo.view(small, "alpha", "default")
    kept = memo.tokens
    for event in big_session(make_session, "b").events:
        small.apply(event)
    grown = memo.view(small, "alpha", "default")
    assert memo.tokens == kept and len(memo) == 1
    assert grown == HistoryMemo().view(small, "alpha", "default")


def test_events_behind_a_compaction_count_with_the_snapshot(make_session):
    from tests.compiler.test_compaction_history import compaction, turns

    events = turns(3)
    summary = compaction("asked about 0 and 1", events[:4], event_id="c")
    summary.data.update(raw_tokens=5000, summary_tokens=10)
    memo = HistoryMemo()
    view = memo.view(make_session(*events, summary), "alpha", "default")
    assert view.compactions == ["c"] and memo.tokens == view.tokens + 5000
