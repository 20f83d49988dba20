"""ADK events <-> the mnemoray events a session store keeps.

An ADK event is stored as the mnemoray events :mod:`mnemoray.adk.mapping` makes of
it (a message, tool calls, tool results: what memory distillation, compaction and
the context compiler read), and its whole JSON rides on the first of them under
``data["adk"]``, so reading it back gives ADK the very event it appended, thought
signatures and all. Events with no ADK JSON (appended over HTTP, or compaction
summaries mnemoray wrote) are mapped back field by field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from google.adk.events.event import Event as AdkEvent
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from mnemoray.adk.importer import events_from_adk
from mnemoray.sessions.events import Event

ADK_KEY = "adk"  # data key of the first mapped event: the ADK event's JSON


def to_store(event: AdkEvent, index: int = 0) -> list[Event]:
    """The mnemoray events of one (non-partial, temp-trimmed) ADK event."""
    raw = event.model_dump(mode="json", exclude_none=True)
    mapped = events_from_adk(raw, index)
    mapped[0] = replace(mapped[0], data={**mapped[0].data, ADK_KEY: raw})
    return mapped


def _content(role: str, part: types.Part) -> types.Content:
    return types.Content(role=role, parts=[part])


def _native(e: Event) -> AdkEvent:
    """An ADK event for a mnemoray event that was not appended through ADK."""
    content: types.Content | None = None
    actions = EventActions(state_delta=dict(e.state_delta), artifact_delta=dict(e.artifact_delta))
    extra: dict[str, Any] = {}
    if e.type == "message" and e.text:
        content = _content("user" if e.role == "user" else "model", types.Part(text=e.text))
    elif e.type == "tool_call":
        content = _content(
            "model",
            types.Part(
                function_call=types.FunctionCall(
                    id=e.data["call_id"], name=e.data["name"], args=e.data.get("args") or {}
                )
            ),
        )
    elif e.type == "tool_result":
        response = e.data.get("response")
        content = _content(
            "user",
            types.Part(
                function_response=types.FunctionResponse(
                    id=e.data["call_id"],
                    name=e.data["name"],
                    response=response if isinstance(response, dict) else {"result": response},
                )
            ),
        )
    elif e.type == "compaction":
        actions.compaction = EventCompaction(
            start_timestamp=e.data["start_ts"],
            end_timestamp=e.data["end_ts"],
            compacted_content=_content("model", types.Part(text=e.data.get("summary") or e.text)),
        )
    elif e.type == "error":
        extra = {"error_code": str(e.data.get("code") or "ERROR"), "error_message": e.text}
    return AdkEvent(
        id=e.id,
        invocation_id=e.invocation_id,
        author=e.author,
        timestamp=e.timestamp,
        content=content,
        actions=actions,
        **extra,
    )


def to_adk(events: Iterable[Event]) -> list[AdkEvent]:
    """ADK events of a stored session, in order: one per appended ADK event."""
    out: list[AdkEvent] = []
    from_adk: set[str] = set()
    for e in events:
        raw = e.data.get(ADK_KEY)
        if isinstance(raw, dict):
            from_adk.add(e.id)
            out.append(AdkEvent.model_validate(raw))
        elif e.id.rpartition(".")[0] not in from_adk:  # not a part of one already given
            out.append(_native(e))
    return out


__all__ = ["ADK_KEY", "to_adk", "to_store"]
