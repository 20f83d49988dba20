"""What every session store shares: its errors, the notices its listeners get, the
listing row, and the checks of a new session's first events and state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from mnemoray import limits
from mnemoray.errors import Conflict, InvalidInput, NotFound
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session, SessionError
from mnemoray.sessions.state import ScopedDelta, persisted_event, split_delta


# The builtin second bases keep ``except KeyError`` / ``except ValueError`` callers working.
class SessionNotFoundError(NotFound, KeyError):
    def __init__(self, app_name: str, user_id: str, session_id: str) -> None:
        super().__init__(f"session not found: app={app_name!r} user={user_id!r} id={session_id!r}")


class SessionExistsError(Conflict, ValueError):
    """A session with this id already exists."""


class StaleSessionError(Conflict, RuntimeError):
    """The session changed since this copy was loaded; reload and retry."""


class SessionEndedError(Conflict, RuntimeError):
    """The session has ended: no more events."""


class DuplicateEventError(Conflict, ValueError):
    """An event with this id is already in the session."""


CATCH_UP_TRIES = 3  # compactions landing between a reload and the append, in a row


def only_compactions_since(session: Session, version: int) -> bool:
    """Whether every event ``session`` holds past ``version`` is a compaction."""
    return 0 <= version <= session.version and all(
        e.type == "compaction" for e in session.events[version : session.version]
    )


SessionChange = Literal["ended", "deleted", "appended"]
DEFAULT_CHANGES: frozenset[SessionChange] = frozenset({"ended", "deleted"})


@dataclass(frozen=True)
class SessionNotice:
    """What listeners receive. ``session`` is the final copy on "ended", the
    caller's (just updated) copy on "appended", None on "deleted"."""

    change: SessionChange
    app_name: str
    user_id: str
    session_id: str
    session: Session | None = None


Listener = Callable[[SessionNotice], None]


@dataclass(frozen=True)
class SessionInfo:
    app_name: str
    user_id: str
    session_id: str
    created_at: float
    updated_at: float
    ended_at: float | None
    num_events: int


def initial_events(session: Session, events: Sequence[Event]) -> list[Event]:
    """A new session's first events as stored: its id, none partial (a streaming
    fragment is never stored, so none can open a session), no ``temp:`` state."""
    out = [persisted_event(replace(e, session_id=session.session_id)) for e in events]
    seen: set[str] = set()
    for i, event in enumerate(out):
        if event.partial:
            raise InvalidInput("a partial event cannot open a session", field=f"events[{i}]")
        if event.id in seen:
            raise DuplicateEventError(f"event id {event.id!r} given twice", field=f"events[{i}]")
        seen.add(event.id)
    return out


def initial_state(state: dict[str, Any] | None) -> ScopedDelta:
    """A new session's ``state`` by scope, checked like event state deltas (JSON only:
    no NaN, no lone surrogates), so no store persists what it cannot read back."""
    limits.json_object_bytes(state or {}, "state", SessionError)
    return split_delta(state or {})
