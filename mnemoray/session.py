"""The Session: an event log plus scoped state (docs/architecture.md, "Sessions and events")."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.events import Event, EventError, new_id, parse_timestamp
from mnemoray.state import split_delta


class SessionError(InvalidInput):
    """A session (or a field of one) is malformed; ``field`` names it."""


@dataclass
class Session:
    app_name: str
    user_id: str
    session_id: str = field(default_factory=new_id)
    state: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    ended_at: float | None = None
    # Optimistic-concurrency token: the number of events persisted when this
    # copy was loaded. A store refuses an append from a stale copy.
    version: int = 0

    def __post_init__(self) -> None:
        for name in ("app_name", "user_id", "session_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise SessionError("must be a non-empty string", field=name)
        if not isinstance(self.state, dict):
            raise SessionError("expected an object", field="state")
        if not self.updated_at:
            self.updated_at = self.created_at

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.app_name, self.user_id, self.session_id)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def apply(self, event: Event) -> None:
        """Apply an event to this in-memory copy (state delta incl. temp: keys)."""
        self.events.append(event)
        self.state.update(split_delta(event.state_delta).persisted)
        self.state.update(split_delta(event.state_delta).temp)
        self.updated_at = max(self.updated_at, event.timestamp)

    def to_dict(self) -> dict[str, Any]:
        return {
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "state": dict(self.state),
            "events": [e.to_dict() for e in self.events],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "ended_at": self.ended_at,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Session:
        """Build a session from the archive's dict form.

        Errors name the field (``events[3].role``) so a caller can quarantine
        the row with a precise reason.
        """
        if not isinstance(raw, dict):
            raise SessionError(f"expected an object, got {type(raw).__name__}")
        for name in ("app_name", "user_id", "session_id"):
            if not isinstance(raw.get(name), str) or not raw.get(name):
                raise SessionError("missing or not a non-empty string", field=name)
        raw_events = [] if raw.get("events") is None else raw["events"]
        if not isinstance(raw_events, list):
            raise SessionError("expected a list", field="events")
        events: list[Event] = []
        seen: set[str] = set()
        for i, raw_event in enumerate(raw_events):
            if not isinstance(raw_event, dict):
                raise SessionError(
                    f"expected an object, got {type(raw_event).__name__}", field=f"events[{i}]")
            try:
                event = Event.from_dict({**raw_event, "session_id": raw["session_id"]})
            except EventError as exc:
                raise SessionError.nested(exc, f"events[{i}]") from exc
            if event.id in seen:
                raise SessionError(f"duplicate event id {event.id!r}", field=f"events[{i}].id")
            seen.add(event.id)
            events.append(event)
        state = raw.get("state") or {}
        if isinstance(state, str):
            try:
                state = json.loads(state)
            except json.JSONDecodeError as exc:
                raise SessionError(f"invalid JSON ({exc.msg})", field="state") from exc
        times: dict[str, float | None] = {}
        for name in ("created_at", "updated_at", "ended_at"):
            value = raw.get(name)
            try:
                times[name] = None if value is None else parse_timestamp(value, name)
            except EventError as exc:
                raise SessionError.nested(exc) from exc
        created = times["created_at"] or (events[0].timestamp if events else time.time())
        updated = times["updated_at"] or (events[-1].timestamp if events else created)
        return cls(
            app_name=raw["app_name"],
            user_id=raw["user_id"],
            session_id=raw["session_id"],
            state=state,
            events=events,
            created_at=created,
            updated_at=updated,
            ended_at=times["ended_at"],
            version=len(events),
        )
