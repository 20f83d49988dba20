"""A session as it was right after one of its events: to compile an earlier turn again
(the memory inspector compiles each user turn to show the prefix hash across turns)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from mnemoray.artifacts.view import ArtifactsAt, recorded_versions
from mnemoray.compiler.services import Services
from mnemoray.errors import NotFound
from mnemoray.sessions.session import Session
from mnemoray.sessions.state import split_delta
from mnemoray.sessions.store import SessionStore

_UNSET = object()


def replay(
    sessions: SessionStore, session: Session, at_event_id: str, services: Services
) -> tuple[Session, Services]:
    """``session`` (as ``sessions`` holds it) right after ``at_event_id``, and ``services``
    with its artifacts limited to what the session had then (a read-only
    :class:`mnemoray.artifacts.view.ArtifactsAt`): what a compile at that event reads.
    Memories and the user profile are read as they are now. :class:`NotFound` (field
    ``at_event_id``) for an unknown id, before anything else is read."""
    _position(session, at_event_id, "at_event_id")
    created = sessions.created_state(*session.key)
    earlier = session_at(session, at_event_id, created_state=created)
    if services.artifacts is None:
        return earlier, services
    view = ArtifactsAt(services.artifacts, *session.key, recorded_versions(earlier.events))
    return earlier, replace(services, artifacts=view)


def session_at(
    session: Session,
    event_id: str,
    field: str = "at_event_id",
    *,
    created_state: dict[str, Any] | None = None,
) -> Session:
    """A copy of ``session`` holding its events up to and including ``event_id``, with the
    state it had then. :class:`NotFound` (naming ``field``) for an unknown id.

    The store keeps the current state, not its history, so only the keys a later event
    changed are rewound, each to (in this order) its last value in a kept event, else its
    value in ``created_state`` (:meth:`SessionStore.created_state`: what the session was
    created with, ``user:``/``app:`` keys as it saw them then), else it is left out: it
    came with a later event. Without ``created_state`` (None: a session stored before the
    store kept it) the creation values are not known, and such a key is left out too
    (rather than shown with the value a later event gave it). What other sessions did to
    ``user:``/``app:`` keys is not rewound: a key this session's later events did not
    change shows its current value.
    The copy is not ended; its ``version`` is the number of events it holds.
    """
    index = _position(session, event_id, field)
    kept, later = session.events[: index + 1], session.events[index + 1 :]
    changed = {key for e in later for key in split_delta(e.state_delta).persisted}
    earlier: dict[str, Any] = {}
    for e in kept:
        earlier.update(split_delta(e.state_delta).persisted)
    state = copy.deepcopy(session.state)
    for key in changed:
        value = earlier.get(key, _UNSET)
        if value is _UNSET and created_state is not None:
            value = created_state.get(key, _UNSET)
        if value is _UNSET:
            state.pop(key, None)
        else:
            state[key] = copy.deepcopy(value)
    return Session(
        session.app_name,
        session.user_id,
        session.session_id,
        state=state,
        events=list(kept),
        created_at=session.created_at,
        updated_at=max([session.created_at, *(e.timestamp for e in kept)]),
        ended_at=None,
        version=len(kept),
    )


def _position(session: Session, event_id: str, field: str) -> int:
    index = next((i for i, e in enumerate(session.events) if e.id == event_id), None)
    if index is None:
        raise NotFound(f"no event {event_id!r} in session {session.session_id!r}", field=field)
    return index


__all__ = ["replay", "session_at"]
