"""ADK Session JSON -> mnemoray Session, proven on what google-adk really emits."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions
from google.adk.events.event_actions import EventCompaction
from google.adk.sessions import InMemorySessionService
from google.genai import types

from mnemoray.adk.importer import session_from_adk
from mnemoray.adk.mapping import AdkImportError, looks_like_adk
from mnemoray.backfill.archive import session_from_record
from tests.support.factories import T2026 as T0


def _content(role: str, *parts: types.Part) -> types.Content:
    return types.Content(role=role, parts=list(parts))


def _adk_events() -> list[AdkEvent]:
    text = types.Part.from_text
    return [
        AdkEvent(
            id="e1",
            invocation_id="inv1",
            author="user",
            timestamp=T0,
            content=_content("user", text(text="Find me a flight to Lisbon")),
            actions=EventActions(state_delta={"user:home": "Berlin", "temp:draft": 1}),
        ),
        AdkEvent(
            id="e2",
            invocation_id="inv1",
            author="travel_agent",
            timestamp=T0 + 1,
            content=_content(
                "model",
                text(text="Let me "),
                text(text="check."),
                types.Part(
                    function_call=types.FunctionCall(
                        id="c1", name="search_flights", args={"to": "LIS"}
                    )
                ),
                types.Part(
                    function_call=types.FunctionCall(name="get_weather", args={"city": "Lisbon"})
                ),
            ),
            actions=EventActions(state_delta={"leg": 1}, artifact_delta={"plan.md": 0}),
        ),
        AdkEvent(
            id="e3",
            invocation_id="inv1",
            author="travel_agent",
            timestamp=T0 + 2,
            content=_content(
                "user",
                types.Part(
                    function_response=types.FunctionResponse(
                        id="c1", name="search_flights", response={"price_eur": 89}
                    )
                ),
                types.Part(
                    function_response=types.FunctionResponse(
                        name="get_weather", response={"sky": "clear"}
                    )
                ),
            ),
        ),
        AdkEvent(
            id="e4",
            invocation_id="inv1",
            author="travel_agent",
            timestamp=T0 + 3,
            content=_content(
                "model",
                types.Part(text="User wants sun.", thought=True),
                text(text="TAP at 89 EUR, sunny."),
            ),
        ),
        AdkEvent(
            id="e5",
            invocation_id="inv1",
            author="travel_agent",
            timestamp=T0 + 4,
            actions=EventActions(
                state_delta={"app:fares": "cached"}, transfer_to_agent="booking_agent"
            ),
        ),
        AdkEvent(
            id="e6",
            invocation_id="inv2",
            author="user",
            timestamp=T0 + 5,
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=T0,
                    end_timestamp=T0 + 2,
                    compacted_content=_content("model", text(text="Maya looked at flights.")),
                )
            ),
        ),
        AdkEvent(
            id="e7",
            invocation_id="inv2",
            author="travel_agent",
            timestamp=T0 + 6,
            error_code="SAFETY",
            error_message="Response blocked",
        ),
    ]


def _real_adk_session() -> Any:
    """A session as ADK's own session service stores it."""

    async def build() -> Any:
        service = InMemorySessionService()
        session = await service.create_session(
            app_name="travel", user_id="maya", session_id="s1", state={"user:name": "Maya"}
        )
        for event in _adk_events():
            await service.append_event(session, event)
        return await service.get_session(app_name="travel", user_id="maya", session_id="s1")

    return asyncio.run(build())


@pytest.fixture(scope="module")
def adk_session() -> Any:
    return _real_adk_session()


@pytest.fixture(params=["camelCase", "snake_case"])
def adk_json(request: pytest.FixtureRequest, adk_session: Any) -> dict[str, Any]:
    return adk_session.model_dump(mode="json", by_alias=request.param == "camelCase")


def test_maps_real_adk_output(adk_json: dict[str, Any]) -> None:
    assert looks_like_adk(adk_json)
    s = session_from_adk(adk_json)
    assert (s.app_name, s.user_id, s.session_id) == ("travel", "maya", "s1")
    assert s.version == len(s.events)
    assert all(e.session_id == "s1" for e in s.events)
    # ADK's service applies deltas to state (and drops temp:); so do we, never keeping temp:.
    assert s.state == {"user:name": "Maya", "user:home": "Berlin", "leg": 1, "app:fares": "cached"}
    assert s.created_at == T0 and s.updated_at >= T0 + 6

    by_id = {e.id: e for e in s.events}
    assert [e.id for e in s.events] == [
        "e1",
        "e2",
        "e2.1",
        "e2.2",
        "e3",
        "e3.1",
        "e4",
        "e5",
        "e6",
        "e7",
    ]

    e1 = by_id["e1"]
    assert (e1.type, e1.role, e1.author, e1.text) == (
        "message",
        "user",
        "user",
        "Find me a flight to Lisbon",
    )
    assert e1.invocation_id == "inv1" and e1.timestamp == T0
    # The event keeps its delta as ADK recorded it (ADK strips temp: before storing).
    assert (
        e1.state_delta
        == adk_json["events"][0]["actions"][
            "stateDelta" if "appName" in adk_json else "state_delta"
        ]
    )

    # One ADK event with text + two calls -> message then one tool_call per call.
    msg, call1, call2 = by_id["e2"], by_id["e2.1"], by_id["e2.2"]
    assert (msg.type, msg.role, msg.text) == ("message", "model", "Let me check.")
    assert msg.state_delta == {"leg": 1} and msg.artifact_delta == {"plan.md": 0}
    assert (call1.type, call1.role, call1.author) == ("tool_call", "model", "travel_agent")
    assert call1.data == {"name": "search_flights", "args": {"to": "LIS"}, "call_id": "c1"}
    assert call1.state_delta == {} and call1.artifact_delta == {}
    assert call2.data["name"] == "get_weather" and call2.data["call_id"]

    # Responses: role tool; the one without an id pairs with the open get_weather call.
    r1, r2 = by_id["e3"], by_id["e3.1"]
    assert (r1.type, r1.role, r1.author) == ("tool_result", "tool", "travel_agent")
    assert r1.data == {"name": "search_flights", "response": {"price_eur": 89}, "call_id": "c1"}
    assert r2.data["call_id"] == call2.data["call_id"]
    assert r2.data["response"] == {"sky": "clear"}

    # Thoughts are not conversation.
    assert by_id["e4"].text == "TAP at 89 EUR, sunny."

    control = by_id["e5"]
    assert (control.type, control.text) == ("control", "")
    assert control.state_delta == {"app:fares": "cached"}
    assert control.data["actions"]["transfer_to_agent"] == "booking_agent"

    compaction = by_id["e6"]
    assert compaction.type == "compaction" and compaction.text == "Maya looked at flights."
    assert compaction.data["start_ts"] == T0 and compaction.data["end_ts"] == T0 + 2
    assert compaction.data["source_event_ids"] == ["e1", "e2", "e2.1", "e2.2", "e3", "e3.1"]

    error = by_id["e7"]
    assert (error.type, error.text, error.data) == ("error", "Response blocked", {"code": "SAFETY"})


def test_camel_and_snake_map_identically(adk_session: Any) -> None:
    camel = session_from_adk(adk_session.model_dump(mode="json", by_alias=True))
    snake = session_from_adk(adk_session.model_dump(mode="json"))
    sparse = session_from_adk(adk_session.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert camel.to_dict() == snake.to_dict() == sparse.to_dict()


def test_missing_call_ids_are_deterministic(adk_session: Any) -> None:
    raw = adk_session.model_dump(mode="json", by_alias=True)
    first, second = session_from_adk(copy.deepcopy(raw)), session_from_adk(copy.deepcopy(raw))
    assert [e.data.get("call_id") for e in first.events] == [
        e.data.get("call_id") for e in second.events
    ]
    assert first.events[3].data["call_id"] == "e2.call3"  # event id + part index


def test_response_without_id_and_no_open_call() -> None:
    s = session_from_adk(
        {
            "id": "s",
            "app_name": "a",
            "user_id": "u",
            "events": [
                {
                    "id": "x",
                    "author": "agent",
                    "timestamp": 1.0,
                    "content": {
                        "parts": [{"function_response": {"name": "f", "response": {"ok": 1}}}]
                    },
                }
            ],
        }
    )
    assert s.events[0].data["call_id"] == "x.result0"


def test_route_through_session_from_record(adk_json: dict[str, Any]) -> None:
    assert session_from_record(adk_json).to_dict() == session_from_adk(adk_json).to_dict()
    assert not looks_like_adk(
        {
            "app_name": "a",
            "user_id": "u",
            "session_id": "s",
            "events": [{"author": "user", "text": "hi"}],
        }
    )


def test_partial_and_unmapped_parts_kept_visible() -> None:
    raw = {
        "id": "s",
        "appName": "a",
        "userId": "u",
        "events": [
            {
                "id": "p",
                "author": "agent",
                "timestamp": "2026-01-01T00:00:00Z",
                "partial": True,
                "content": {"role": "model", "parts": [{"text": "Lis"}]},
            },
            {
                "id": "img",
                "author": "user",
                "timestamp": 2.0,
                "content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
            },
        ],
    }
    s = session_from_adk(raw)
    assert s.events[0].partial and s.events[0].timestamp == 1_767_225_600.0
    assert (s.events[1].type, s.events[1].data) == ("control", {"unmapped_parts": ["inline_data"]})


def test_missing_event_id_gets_stable_one() -> None:
    raw = {
        "id": "s",
        "app_name": "a",
        "user_id": "u",
        "events": [
            {"author": "user", "timestamp": 1.0, "content": {"parts": [{"text": "a"}]}},
            {"author": "user", "timestamp": 2.0, "content": {"parts": [{"text": "b"}]}},
        ],
    }
    assert [e.id for e in session_from_adk(raw).events] == ["adk-0", "adk-1"]


def _camel_session(*events: dict[str, Any]) -> dict[str, Any]:
    return {"id": "s1", "appName": "a", "userId": "u", "events": list(events)}


def _ok_event(i: int) -> dict[str, Any]:
    return {
        "id": f"e{i}",
        "author": "user",
        "timestamp": float(i),
        "content": {"parts": [{"text": "hi"}]},
    }


@pytest.mark.parametrize(
    ("bad_event", "message"),
    [
        (
            {
                "id": "x",
                "author": "agent",
                "timestamp": 1.0,
                "content": {"parts": [{"text": "ok"}, {"functionCall": {"args": {}}}]},
            },
            r"^events\[2\]\.content\.parts\[1\]\.functionCall\.name: missing",
        ),
        (
            {
                "id": "x",
                "author": "agent",
                "timestamp": 1.0,
                "content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]},
            },
            r"^events\[2\]\.content\.parts\[0\]\.functionCall\.args: expected an object",
        ),
        (
            {"id": "x", "author": "agent", "timestamp": 1.0, "content": {"parts": "hello"}},
            r"^events\[2\]\.content\.parts: expected a list",
        ),
        (
            {"id": "x", "author": "agent", "timestamp": 1.0, "content": {"parts": ["hello"]}},
            r"^events\[2\]\.content\.parts\[0\]: expected an object",
        ),
        (
            {"id": "x", "author": "agent", "timestamp": 1.0, "content": {"parts": [{"text": 5}]}},
            r"^events\[2\]\.content\.parts\[0\]\.text: expected a string",
        ),
        (
            {"id": "x", "timestamp": 1.0, "content": {"parts": [{"text": "hi"}]}},
            r"^events\[2\]\.author: missing",
        ),
        (
            {"id": "x", "author": "user", "timestamp": "yesterday"},
            r"^events\[2\]\.timestamp: not ISO-8601",
        ),
        ({"id": "x", "author": "user"}, r"^events\[2\]\.timestamp: missing"),
        (
            {
                "id": "x",
                "author": "user",
                "timestamp": 1.0,
                "actions": {"artifactDelta": {"plan.md": "v2"}},
            },
            r"^events\[2\]\.actions\.artifactDelta\.plan\.md: version must be",
        ),
        (
            {"id": "x", "author": "user", "timestamp": 1.0, "actions": {"stateDelta": [1]}},
            r"^events\[2\]\.actions\.stateDelta: expected an object",
        ),
        (
            {"id": "e0", "author": "user", "timestamp": 1.0, "content": {"parts": [{"text": "x"}]}},
            r"^events\[2\]\.id: duplicate event id 'e0'",
        ),
        ("not an event", r"^events\[2\]: expected an object"),
    ],
)
def test_errors_name_the_field(bad_event: Any, message: str) -> None:
    with pytest.raises(AdkImportError, match=message):
        session_from_adk(_camel_session(_ok_event(0), _ok_event(1), bad_event))


def test_snake_case_errors_use_snake_names() -> None:
    raw = {
        "id": "s1",
        "app_name": "a",
        "user_id": "u",
        "events": [
            {
                "id": "x",
                "author": "a",
                "timestamp": 1.0,
                "content": {"parts": [{"function_response": {"response": {}}}]},
            }
        ],
    }
    with pytest.raises(
        AdkImportError, match=r"^events\[0\]\.content\.parts\[0\]\.function_response\.name"
    ):
        session_from_adk(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"id": "s", "userId": "u"}, r"^appName: missing"),
        ({"id": "s", "app_name": "a"}, r"^user_id: missing"),
        ({"appName": "a", "userId": "u"}, r"^id: missing"),
        ({"id": "s", "appName": "a", "userId": "u", "events": {}}, r"^events: expected a list"),
        ({"id": "s", "appName": "a", "userId": "u", "state": "{nope"}, r"^state: invalid JSON"),
        (
            {"id": "s", "appName": "a", "userId": "u", "lastUpdateTime": "soon"},
            r"^lastUpdateTime: not ISO-8601",
        ),
    ],
)
def test_session_level_errors(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(AdkImportError, match=message):
        session_from_adk(raw)
