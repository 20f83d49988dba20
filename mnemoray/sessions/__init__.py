"""Sessions: typed, immutable events, state in scopes, and the stores that keep them
(in memory, or SQLite: the embedded default)."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "Event": "mnemoray.sessions.events",
    "EventError": "mnemoray.sessions.events",
    "InMemorySessionStore": "mnemoray.sessions.store",
    "SQLiteSessionStore": "mnemoray.sessions.sqlite.store",
    "Session": "mnemoray.sessions.session",
    "SessionError": "mnemoray.sessions.session",
    "SessionNotFoundError": "mnemoray.sessions.types",
    "SessionStore": "mnemoray.sessions.store",
    "StaleSessionError": "mnemoray.sessions.types",
    "model_message": "mnemoray.sessions.events",
    "tool_call": "mnemoray.sessions.events",
    "tool_result": "mnemoray.sessions.events",
    "user_message": "mnemoray.sessions.events",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
