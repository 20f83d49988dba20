from __future__ import annotations

from collections.abc import Callable

import pytest

from mnemoray.events import Event
from mnemoray.session import Session


@pytest.fixture
def make_session() -> Callable[..., Session]:
    """A session holding ``events`` (state deltas applied), with stable ids."""

    def make(*events: Event, state: dict | None = None, session_id: str = "s1") -> Session:
        session = Session(app_name="app", user_id="u1", session_id=session_id,
                          state=dict(state or {}))
        for event in events:
            session.apply(event)
        return session

    return make
