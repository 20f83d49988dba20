"""Shared test data: fixed clocks and the conversations several test modules build on.

Import as ``from factories import ...`` (``tests/`` is on ``sys.path`` through its
conftest, like ``archive_gen``).
"""

from __future__ import annotations

from typing import Any

from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.session import Session

DAY = 86_400.0
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
T2026 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

# A paraphrase of the parrot conversation that shares no index term with it
# dense recall finds it, keyword recall does not.
FLYING = "remind me about that flying animal we talked about"

Turn = tuple[str, str]  # ("u" | "m", text)

PARROT_TURNS: tuple[Turn, ...] = (
    ("u", "I'm thinking about getting a pet parrot. What should I know?"),
    (
        "m",
        "Parrots are social and intelligent birds. They need a large cage, daily "
        "attention and a varied diet.",
    ),
    (
        "u",
        "I really like African Grey parrots because they can talk. My apartment is small though.",
    ),
    (
        "m",
        "African Greys are great talkers but need space and stimulation; a smaller "
        "species may suit a small apartment.",
    ),
)


def session(sid: str, t: float, *turns: Turn, user: str = "alice", app: str = "app") -> Session:
    """A session of alternating turns one minute apart; event ids ``<sid>-e<i>``."""
    events = [
        user_message(text, timestamp=t + i * 60, id=f"{sid}-e{i}")
        if who == "u"
        else model_message("assistant", text, timestamp=t + i * 60, id=f"{sid}-e{i}")
        for i, (who, text) in enumerate(turns)
    ]
    return Session(app, user, sid, events=events, created_at=t)


def parrot(user: str = "alice", sid: str = "parrot", t: float = T0, app: str = "app") -> Session:
    """The seed-003 conversation: a user asks about getting a pet parrot."""
    return session(sid, t, *PARROT_TURNS, user=user, app=app)


def assert_compiled_without_memory(out: dict[str, Any], error: str = "StoreCorrupt") -> None:
    """A compile answer whose memory preload failed with ``error``: no memory block, and
    the trace and ``degraded`` name the step."""
    texts = [
        out["system_instruction"],
        *(p.get("text") or "" for c in out["contents"] for p in c["parts"]),
    ]
    assert not any("<memory>" in text for text in texts)
    step = next(s for s in out["trace"] if s["name"] == "memory_preload")
    assert step["error"]["step"] == "memory_preload"
    assert step["error"]["error"] == error
    assert out["degraded"] == [step["error"]]
