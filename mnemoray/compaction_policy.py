"""A session's own compaction policy, kept in the session itself.

``POST /v1/sessions`` with a ``compaction`` object (or :func:`create_session`
in-process) stores the overrides as the session's first event, a ``control``
event ``{"action": "compaction_policy", "policy": {...}}``: every session store
keeps it without a schema change, every replica reads the same policy, and the
compiler and memory ingestion skip control events. The effective policy is the
app's (``CompactionConfig``) with these fields replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemoray.compaction import CompactionConfig
from mnemoray.errors import InvalidInput
from mnemoray.events import Event
from mnemoray.session import Session
from mnemoray.session_store import SessionStore

POLICY_ACTION = "compaction_policy"
POLICY_AUTHOR = "mnemoray"


def check_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides as stored, or InvalidInput naming ``compaction.<key>``."""
    try:
        config = CompactionConfig().with_overrides(overrides)
    except InvalidInput as exc:
        key = (exc.field or "").removeprefix("CompactionConfig.")
        raise InvalidInput(exc.reason, field=f"compaction.{key}") from None
    return {k: v for k, v in config.to_dict().items() if k in overrides}


def policy_event(overrides: Mapping[str, Any]) -> Event:
    return Event(author=POLICY_AUTHOR, role="system", type="control",
                 data={"action": POLICY_ACTION, "policy": check_overrides(overrides)})


def session_overrides(session: Session) -> dict[str, Any]:
    """The session's own policy fields (the last policy event wins), else {}."""
    for event in reversed(session.events):
        if event.type == "control" and event.data.get("action") == POLICY_ACTION:
            policy = event.data.get("policy")
            return dict(policy) if isinstance(policy, Mapping) else {}
    return {}


def effective_config(app_config: CompactionConfig, session: Session) -> CompactionConfig:
    """The app's policy with the session's overrides; a stored policy this version cannot
    read (written by a newer one) leaves the app's."""
    try:
        return app_config.with_overrides(session_overrides(session))
    except InvalidInput:
        return app_config


def create_session(store: SessionStore, app_name: str, user_id: str,
                   session_id: str | None = None, state: Mapping[str, Any] | None = None,
                   compaction: Mapping[str, Any] | None = None) -> Session:
    """Create a session; with ``compaction``, its own policy is its first event
    (checked before anything is written: a bad value creates nothing)."""
    event = None if compaction is None else policy_event(compaction)
    session = store.create_session(app_name, user_id, session_id,
                                   dict(state) if state else None)
    if event is not None:
        store.append_event(session, event)
    return session
