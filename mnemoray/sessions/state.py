"""Scoped session state.

A key's prefix names its scope: ``app:`` is shared by all users of an app,
``user:`` by all sessions of one user in an app, ``temp:`` lives for the
current invocation only and is never persisted, and an unprefixed key belongs
to the session. A session's ``state`` dict is the merged view of all four.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mnemoray.sessions.events import Event

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"

Scope = Literal["app", "user", "temp", "session"]


def scope_of(key: str) -> Scope:
    if key.startswith(APP_PREFIX):
        return "app"
    if key.startswith(USER_PREFIX):
        return "user"
    if key.startswith(TEMP_PREFIX):
        return "temp"
    return "session"


@dataclass
class ScopedDelta:
    """A state delta split by scope. Keys keep their prefixes."""

    app: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    temp: dict[str, Any] = field(default_factory=dict)

    @property
    def persisted(self) -> dict[str, Any]:
        """Everything but ``temp:`` keys."""
        return {**self.app, **self.user, **self.session}


def split_delta(delta: dict[str, Any]) -> ScopedDelta:
    out = ScopedDelta()
    for key, value in delta.items():
        getattr(out, scope_of(key))[key] = value
    return out


def without_temp(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if not k.startswith(TEMP_PREFIX)}


def persisted_event(event: Event) -> Event:
    """``event`` as it may be written anywhere (a store, an archive, an answer): its
    ``temp:`` keys dropped from ``state_delta``. Every store writes only this form; the
    appending caller's copy still sees the temp values (:meth:`SessionStore.append_events`)."""
    if not any(k.startswith(TEMP_PREFIX) for k in event.state_delta):
        return event
    return replace(event, state_delta=without_temp(event.state_delta))


def merged_state(
    app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]
) -> dict[str, Any]:
    """The view a session sees: its own keys plus its app's and user's."""
    return {**session, **app, **user}
