"""Events and state as the JSON text a durable session store keeps (SQLite, PostgreSQL),
serialized ahead of the write transaction, which then only writes: a value that is not
JSON fails with nothing written, naming its field."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemoray.sessions.events import Event, EventError
from mnemoray.sessions.state import split_delta


def to_json(value: Any, field: str) -> str:
    try:
        # allow_nan=False: NaN would be read back as NaN and answered as null.
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EventError(f"not JSON-serializable ({exc})", field=field) from exc


def event_body(event: Event) -> str:
    # Check field by field first so the error names the offending field.
    for name in ("data", "artifact_delta"):
        to_json(getattr(event, name), name)
    for key, value in event.state_delta.items():
        to_json(value, f"state_delta.{key}")
    return to_json(event.to_dict(), "event")


@dataclass(frozen=True)
class Prepared:
    """Events serialized ahead of the write transaction (it then only writes)."""

    bodies: list[str]
    app_rows: dict[str, str]  # app: / user: state rows; a later event's value of a key wins
    user_rows: dict[str, str]

    @classmethod
    def of(cls, events: Sequence[Event]) -> Prepared:
        out = cls([event_body(e) for e in events], {}, {})
        for event in events:
            delta = split_delta(event.state_delta)
            out.app_rows.update({k: to_json(v, f"state_delta.{k}") for k, v in delta.app.items()})
            out.user_rows.update({k: to_json(v, f"state_delta.{k}") for k, v in delta.user.items()})
        return out
