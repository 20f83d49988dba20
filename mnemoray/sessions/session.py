"""The Session: an event log plus scoped state (docs/architecture.md, "Sessions and events")."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from mnemoray import limits
from mnemoray.errors import InvalidInput, PayloadTooLarge
from mnemoray.sessions.events import Event, EventError, new_id, parse_timestamp
from mnemoray.sessions.state import split_delta


def stable_event_id(raw: dict[str, Any], index: int, raw_event: dict[str, Any]) -> str:
    """The id of an event given without one: derived from its session, position and
    content, so the same session parsed twice (posted again, re-archived, grown) gets
    the same ids and re-ingesting it stores nothing twice."""
    try:
        text = json.dumps(
            [raw.get("app_name"), raw.get("user_id"), raw.get("session_id"), index, raw_event],
            sort_keys=True,
            default=str,
            ensure_ascii=False,
        )
    except (TypeError, ValueError):  # keys of mixed types: no canonical form, a fresh id
        return new_id()
    return "e" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:15]


class SessionError(InvalidInput):
    """A session (or a field of one) is malformed; ``field`` names it."""


class SessionTooLarge(SessionError, PayloadTooLarge):
    """A session over ``limits.MAX_SESSION_EVENTS`` or ``limits.MAX_ROW_BYTES`` (HTTP 413)."""


def check_session_size(events: list[Any]) -> None:
    """The per-session limits, the same for an archive row and a session in a request."""
    if len(events) > limits.MAX_SESSION_EVENTS:
        raise SessionTooLarge(
            f"{len(events)} events, over the limit of "
            f"{limits.MAX_SESSION_EVENTS} (mnemoray.limits."
            f"MAX_SESSION_EVENTS)",
            field="events",
        )
    limits.check_size(
        sum(e.nbytes for e in events),
        "MAX_ROW_BYTES",
        "the session's events",
        "events",
        SessionTooLarge,
    )


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
        for name in ("app_name", "user_id", "session_id"):
            limits.text_bytes(getattr(self, name), name, SessionError)
        for name in ("created_at", "updated_at", "ended_at"):
            limits.check_optional_time(getattr(self, name), name, SessionError)
        # NaN / Infinity would come back as null (or break the answer): refused, key named.
        limits.json_object_bytes(self.state, "state", SessionError)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.app_name, self.user_id, self.session_id)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def apply(self, event: Event) -> None:
        """Apply an event to this in-memory copy (state delta incl. any temp: keys)."""
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
        if len(raw_events) > limits.MAX_SESSION_EVENTS:  # before parsing any of them
            check_session_size(raw_events)
        events: list[Event] = []
        seen: set[str] = set()
        for i, raw_event in enumerate(raw_events):
            if not isinstance(raw_event, dict):
                raise SessionError(
                    f"expected an object, got {type(raw_event).__name__}", field=f"events[{i}]"
                )
            try:
                if raw_event.get("id") is None:
                    raw_event = {**raw_event, "id": stable_event_id(raw, i, raw_event)}
                event = Event.from_dict({**raw_event, "session_id": raw["session_id"]})
            except EventError as exc:
                error = SessionTooLarge if isinstance(exc, PayloadTooLarge) else SessionError
                raise error.nested(exc, f"events[{i}]") from exc
            if event.id in seen:
                raise SessionError(f"duplicate event id {event.id!r}", field=f"events[{i}].id")
            seen.add(event.id)
            events.append(event)
        check_session_size(events)
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
