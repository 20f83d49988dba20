"""The history memo: what it reuses, when it starts over, and its bound. That the
output never changes is tests/compiler/test_compile_pinned.py's job."""

from __future__ import annotations

import json

from mnemoray.compiler.history_memo import HistoryMemo
from mnemoray.events import Event, model_message, tool_call, tool_result, user_message


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
    session = make_session(user_message("hi", id="u"),
                           tool_result("search", "search", {"n": 1}, call_id="c", id="r"))
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
        memo.view(make_session(*(user_message(f"m{i}") for i in range(3)), session_id=sid),
                  "alpha", "default")
    assert len(memo) == 1  # the first session's snapshot went
    memo.view(make_session(*(user_message(f"m{i}") for i in range(6)), session_id="c"),
              "alpha", "default")
    assert len(memo) == 1  # one over the bound is never stored


def test_to_json_matches_the_json_module():
    from decimal import Decimal

    from mnemoray.compiler.casting import to_json

    payloads = [{"b": 1, "a": [1.5, -0.0, 1e300, None, True, "é \" \\ \n \t \u0001 東京"]},
                {"nested": {"z": {}, "y": [], "x": [{"k": 2**70}]}}, {3: "int keys", 1: 2},
                "plain text", 42, 2.5, None, [], {"odd": Decimal("1.10")}]
    for payload in payloads:
        assert to_json(payload) == json.dumps(payload, ensure_ascii=False, sort_keys=True,
                                              default=str)
