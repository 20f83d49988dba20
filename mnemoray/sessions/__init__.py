"""Sessions: typed, immutable events, state in scopes, and the stores that keep them
(in memory, or SQLite: the embedded default)."""

from mnemoray.sessions.events import (
    Event,
    EventError,
    model_message,
    tool_call,
    tool_result,
    user_message,
)
from mnemoray.sessions.session import Session, SessionError
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore, SessionStore
from mnemoray.sessions.types import SessionNotFoundError, StaleSessionError

__all__ = [
    "Event",
    "EventError",
    "InMemorySessionStore",
    "SQLiteSessionStore",
    "Session",
    "SessionError",
    "SessionNotFoundError",
    "SessionStore",
    "StaleSessionError",
    "model_message",
    "tool_call",
    "tool_result",
    "user_message",
]
