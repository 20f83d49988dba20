"""A session as it was right after one of its events: to compile an earlier turn again
(the memory inspector compiles each user turn to show the prefix hash across turns)."""

from __future__ import annotations

import copy
from typing import Any

from mnemoray.errors import NotFound
from mnemoray.session import Session
from mnemoray.state import split_delta

_UNSET = object()


def session_at(session: Session, event_id: str, field: str = "at_event_id") -> Session:
    """A copy of ``session`` holding its events up to and including ``event_id``, with the
    state those events left. :class:`NotFound` (naming ``field``) for an unknown id.

    The store keeps the current state, not its history: a key a later event changed is
    set back to the last value an earlier event gave it, and a key first set by a later
    event is removed (the state the session was created with is kept as it is now).
    The copy is not ended; its ``version`` is the number of events it holds.
    """
    index = next((i for i, e in enumerate(session.events) if e.id == event_id), None)
    if index is None:
        raise NotFound(f"no event {event_id!r} in session {session.session_id!r}", field=field)
    kept, later = session.events[:index + 1], session.events[index + 1:]
    changed = {key for e in later for key in split_delta(e.state_delta).persisted}
    earlier: dict[str, Any] = {}
    for e in kept:
        earlier.update(split_delta(e.state_delta).persisted)
    state = copy.deepcopy(session.state)
    for key in changed:
        value = earlier.get(key, _UNSET)
        if value is _UNSET:
            state.pop(key, None)
        else:
            state[key] = copy.deepcopy(value)
    return Session(session.app_name, session.user_id, session.session_id, state=state,
                   events=list(kept), created_at=session.created_at,
                   updated_at=max([session.created_at, *(e.timestamp for e in kept)]),
                   ended_at=None, version=len(kept))


__all__ = ["session_at"]
