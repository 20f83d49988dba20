"""A session's own compaction policy, kept in the session itself.

``POST /v1/sessions`` with a ``compaction`` object (or :func:`create_session`
in-process) stores the overrides as the session's first event, a ``control``
event ``{"action": "compaction_policy", "policy": {...}}``: every session store
keeps it without a schema change, every replica reads the same policy, and the
compiler and memory ingestion skip control events. The effective policy is the
app's (``CompactionConfig``) with these fields replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemoray.compaction.compactor import CompactionConfig
from mnemoray.compaction.fields import renamed
from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore

POLICY_ACTION = "compaction_policy"
POLICY_AUTHOR = "mnemoray"


def check_overrides(overrides: Any, where: str = "compaction") -> dict[str, Any]:
    """The overrides as stored, or InvalidInput naming ``<where>.<key>``."""
    if not isinstance(overrides, Mapping):
        raise InvalidInput(f"must be an object, got {type(overrides).__name__}", field=where)
    try:
        config = CompactionConfig().with_overrides(overrides)
    except InvalidInput as exc:
        raise renamed(exc, where) from None
    return {k: v for k, v in config.to_dict().items() if k in overrides}


def is_policy_event(event: Event) -> bool:
    return event.type == "control" and event.data.get("action") == POLICY_ACTION


def check_policy_events(events: Sequence[Event], where: str = "events") -> None:
    """Refuse an appended policy event the compactor could not read, naming the key
    (``events[1].data.policy.boundaries``): one stored would be ignored for good."""
    for i, event in enumerate(events):
        if is_policy_event(event):
            check_overrides(event.data.get("policy"), f"{where}[{i}].data.policy")


def policy_event(overrides: Mapping[str, Any]) -> Event:
    return Event(
        author=POLICY_AUTHOR,
        role="system",
        type="control",
        data={"action": POLICY_ACTION, "policy": check_overrides(overrides)},
    )


def session_overrides(session: Session) -> dict[str, Any]:
    """The session's own policy fields (the last policy event wins), else {}."""
    for event in reversed(session.events):
        if is_policy_event(event):
            policy = event.data.get("policy")
            return dict(policy) if isinstance(policy, Mapping) else {}
    return {}


def effective_config(app_config: CompactionConfig, session: Session) -> CompactionConfig:
    """The app's policy with the session's overrides; a stored policy this version cannot
    read (written by a newer one, or appended unchecked in-process) leaves the app's."""
    try:
        return app_config.with_overrides(session_overrides(session))
    except (InvalidInput, TypeError, ValueError):
        return app_config


def create_session(
    store: SessionStore,
    app_name: str,
    user_id: str,
    session_id: str | None = None,
    state: Mapping[str, Any] | None = None,
    compaction: Mapping[str, Any] | None = None,
) -> Session:
    """Create a session; with ``compaction``, its own policy is its first event, written
    in the same transaction (checked before: a bad value creates nothing, and no crash
    leaves the session on its app's policy)."""
    events = [] if compaction is None else [policy_event(compaction)]
    return store.create_session(
        app_name, user_id, session_id, dict(state) if state else None, events=events
    )
