"""Map Google ADK ``Session`` JSON onto mnemoray sessions (docs/architecture.md, "Input").

The per-event rules live in :mod:`mnemoray.adk.mapping`. Dependency-free on
purpose: archives are read where google-adk is not installed (Ray workers).
"""

from __future__ import annotations

import json
import time
from typing import Any

from mnemoray.adk.mapping import _CAMEL_SESSION_KEYS, AdkImportError, _Mapper
from mnemoray.sessions.events import Event, EventError, parse_timestamp
from mnemoray.sessions.session import Session
from mnemoray.sessions.state import without_temp


def events_from_adk(raw_event: dict[str, Any], index: int = 0) -> list[Event]:
    """The mnemoray events of one ADK event (its JSON, either spelling); errors name
    the field as ``events[<index>]...``."""
    mapper = _Mapper(camel=any(k[:1].islower() and any(c.isupper() for c in k) for k in raw_event))
    mapper.map_event(index, raw_event)
    return mapper.events


def session_from_adk(raw: dict[str, Any]) -> Session:
    """A mnemoray Session from ADK Session JSON (camelCase or snake_case).

    Raises :class:`AdkImportError` naming the field, e.g.
    ``events[4].content.parts[1].functionCall.name: missing ...``.
    """
    if not isinstance(raw, dict):
        raise AdkImportError(f"expected an object, got {type(raw).__name__}")
    mapper = _Mapper(camel=any(key in raw for key in _CAMEL_SESSION_KEYS))
    fields: dict[str, str] = {}
    for name in ("app_name", "user_id"):
        value = mapper.get(raw, name)
        if not isinstance(value, str) or not value:
            raise AdkImportError("missing or not a non-empty string", field=mapper.spell(name))
        fields[name] = value
    session_id = raw.get("id") or raw.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise AdkImportError("missing or not a non-empty string", field="id")

    state = raw.get("state") or {}
    if isinstance(state, str):  # JSON-encoded in columnar archives
        try:
            state = json.loads(state)
        except json.JSONDecodeError as exc:
            raise AdkImportError(f"invalid JSON ({exc.msg})", field="state") from exc
    if not isinstance(state, dict):
        raise AdkImportError(f"expected an object, got {type(state).__name__}", field="state")

    raw_events = [] if raw.get("events") is None else raw["events"]
    if not isinstance(raw_events, list):
        raise AdkImportError(f"expected a list, got {type(raw_events).__name__}", field="events")
    for i, raw_event in enumerate(raw_events):
        mapper.map_event(i, raw_event)
    events = [e.with_session(session_id) for e in mapper.events]

    last_update = mapper.get(raw, "last_update_time")
    try:
        updated = (
            parse_timestamp(last_update, mapper.spell("last_update_time")) if last_update else 0.0
        )
    except EventError as exc:
        raise AdkImportError.nested(exc) from exc
    created = events[0].timestamp if events else (updated or time.time())
    updated = max(updated, events[-1].timestamp if events else created)
    return Session(
        app_name=fields["app_name"],
        user_id=fields["user_id"],
        session_id=session_id,
        state=without_temp(state),
        events=events,
        created_at=created,
        updated_at=updated,
        version=len(events),
    )


__all__ = ["events_from_adk", "session_from_adk"]
