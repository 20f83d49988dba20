"""Typed, immutable session events (docs/architecture.md, "Sessions and events")."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from mnemoray import limits
from mnemoray.errors import InvalidInput, PayloadTooLarge

Role = Literal["user", "model", "tool", "system"]
EventType = Literal["message", "tool_call", "tool_result", "control", "error", "compaction"]
ROLES: tuple[str, ...] = get_args(Role)
EVENT_TYPES: tuple[str, ...] = get_args(EventType)


class EventError(InvalidInput):
    """An event (or a field of one) is malformed; ``field`` names it."""


class EventTooLarge(EventError, PayloadTooLarge):
    """An event over ``limits.MAX_EVENT_BYTES`` (HTTP 413)."""


def parse_timestamp(value: Any, field_name: str = "timestamp") -> float:
    """Epoch seconds from epoch seconds (int/float/numeric str) or ISO-8601, in the
    valid range of ``limits.check_time`` (finite, 1970 to year 9999)."""
    return limits.check_time(_seconds(value, field_name), field_name, EventError)


def _seconds(value: Any, field_name: str) -> float:
    if isinstance(value, bool) or value is None:
        raise EventError(f"expected ISO-8601 or epoch seconds, got {value!r}", field=field_name)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise EventError(f"not ISO-8601 or epoch seconds: {value!r}", field=field_name) from exc
        return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()
    raise EventError(
        f"expected ISO-8601 or epoch seconds, got {type(value).__name__}", field=field_name
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def new_id() -> str:
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class Event:
    """One thing that happened in a session. Never mutated after creation.

    Tool calls carry ``data={"name", "args", "call_id"}``, tool results
    ``data={"name", "response", "call_id"}``; a compaction event carries
    ``data={"start_ts", "end_ts", "summary", "source_event_ids"}`` and the
    summary text in ``text``.
    """

    author: str
    role: Role = "user"
    type: EventType = "message"
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    state_delta: dict[str, Any] = field(default_factory=dict)
    artifact_delta: dict[str, int] = field(default_factory=dict)
    partial: bool = False
    id: str = field(default_factory=new_id)
    session_id: str = ""
    invocation_id: str = ""
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise EventError(f"{self.role!r} is not one of {', '.join(ROLES)}", field="role")
        if self.type not in EVENT_TYPES:
            raise EventError(f"{self.type!r} is not one of {', '.join(EVENT_TYPES)}", field="type")
        if not isinstance(self.author, str) or not self.author:
            raise EventError("must be a non-empty string", field="author")
        if not isinstance(self.text, str):
            raise EventError(f"expected a string, got {type(self.text).__name__}", field="text")
        for name in ("data", "state_delta", "artifact_delta"):
            value = getattr(self, name)
            if not isinstance(value, dict):
                raise EventError(f"expected an object, got {type(value).__name__}", field=name)
        limits.check_time(self.timestamp, "timestamp", EventError)
        self._check_content()
        for name, version in self.artifact_delta.items():
            if not isinstance(version, int) or isinstance(version, bool) or version < 0:
                raise EventError(
                    "version must be a non-negative int", field=f"artifact_delta.{name}"
                )
        if self.type in ("tool_call", "tool_result"):
            if not self.data.get("name"):
                raise EventError(f"a {self.type} event needs the tool name", field="data.name")
            if not self.data.get("call_id"):
                raise EventError(f"a {self.type} event needs a call_id", field="data.call_id")
        if self.type == "compaction":
            for key in ("start_ts", "end_ts"):
                if not isinstance(self.data.get(key), (int, float)):
                    raise EventError("a compaction event needs epoch seconds", field=f"data.{key}")
                limits.check_time(self.data[key], f"data.{key}", EventError)

    def _check_content(self) -> None:
        """Valid Unicode, JSON-compliant payloads (no NaN), within ``MAX_EVENT_BYTES``:
        whatever is stored must be answerable and storable later (JSON, Parquet, SQLite)."""
        for name in ("author", "id", "session_id", "invocation_id"):
            value = getattr(self, name)
            if isinstance(value, str):
                limits.text_bytes(value, name, EventError)
        sizes = {
            "text": limits.text_bytes(self.text, "text", EventError),
            "data": limits.json_object_bytes(self.data, "data", EventError),
            "state_delta": limits.json_object_bytes(self.state_delta, "state_delta", EventError),
        }
        biggest = max(sizes, key=lambda k: sizes[k])
        limits.check_size(
            sum(sizes.values()), "MAX_EVENT_BYTES", "the event", biggest, EventTooLarge
        )
        # Kept for the session-level limit (``MAX_ROW_BYTES``): not a field, not stored.
        object.__setattr__(self, "_nbytes", sum(sizes.values()))

    @property
    def nbytes(self) -> int:
        """Bytes this event counts against the limits: UTF-8 text plus JSON payloads."""
        cached = self.__dict__.get("_nbytes")
        if cached is None:  # e.g. unpickled from an older version
            self._check_content()
            cached = self.__dict__["_nbytes"]
        return cached

    # -- convenience -----------------------------------------------------
    @property
    def call_id(self) -> str | None:
        return self.data.get("call_id") if self.type in ("tool_call", "tool_result") else None

    @property
    def tool_name(self) -> str | None:
        return self.data.get("name") if self.type in ("tool_call", "tool_result") else None

    def with_session(self, session_id: str) -> Event:
        return replace(self, session_id=session_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Event:
        if not isinstance(raw, dict):
            raise EventError(f"expected an object, got {type(raw).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(raw) - known
        if unknown:
            raise EventError("unknown event field", field=sorted(unknown)[0])
        kwargs = {k: v for k, v in raw.items() if v is not None}
        if "author" not in kwargs:  # else the dataclass raises an unhelpful TypeError
            raise EventError("missing", field="author")
        if "timestamp" in kwargs:
            kwargs["timestamp"] = parse_timestamp(kwargs["timestamp"])
        for name in ("data", "state_delta", "artifact_delta"):
            if isinstance(kwargs.get(name), str):  # JSON-encoded in columnar archives
                try:
                    kwargs[name] = json.loads(kwargs[name]) if kwargs[name] else {}
                except json.JSONDecodeError as exc:
                    raise EventError(f"invalid JSON ({exc.msg})", field=name) from exc
        try:
            return cls(**kwargs)
        except TypeError as exc:  # e.g. missing author
            raise EventError(str(exc)) from exc


# -- constructors for the common kinds ---------------------------------------
def user_message(text: str, **kw: Any) -> Event:
    return Event(author=kw.pop("author", "user"), role="user", type="message", text=text, **kw)


def model_message(author: str, text: str, **kw: Any) -> Event:
    return Event(author=author, role="model", type="message", text=text, **kw)


def tool_call(
    author: str, name: str, args: dict[str, Any], call_id: str | None = None, **kw: Any
) -> Event:
    data = {"name": name, "args": args, "call_id": call_id or new_id()}
    return Event(author=author, role="model", type="tool_call", data=data, **kw)


def tool_result(author: str, name: str, response: Any, call_id: str, **kw: Any) -> Event:
    data = {"name": name, "response": response, "call_id": call_id}
    return Event(author=author, role="tool", type="tool_result", data=data, **kw)
