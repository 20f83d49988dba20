"""Shared by the compaction tests: a recording summarizer, turns, a deadline poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from mnemoray.sessions.events import Event, model_message, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore
from mnemoray.summarizers import Summarizer, Summary


class Recording(Summarizer):
    """Remembers each window; can be held (to catch the appender racing it) or fail."""

    name = "recording"

    def __init__(self) -> None:
        self.windows: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail: Exception | None = None
        self.lock = threading.Lock()

    def summarize(self, events: Sequence[Event]) -> Summary:
        self.entered.set()
        assert self.gate.wait(10)
        if self.fail is not None:
            raise self.fail
        with self.lock:
            self.windows.append([e.id for e in events])
        return Summary(summary=f"summary of {len(events)} events")


def poll(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (out := check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return out


def turns(n: int, first: int = 0, text: Callable[[int], str] | None = None) -> list[Event]:
    out: list[Event] = []
    for k in range(first, first + n):
        inv = f"inv-{k}"
        out += [
            user_message(
                text(k) if text else f"Question {k} about parrots?", id=f"u{k}", invocation_id=inv
            ),
            model_message(
                "agent", f"Answer {k}: parrots like quiet rooms.", id=f"m{k}", invocation_id=inv
            ),
        ]
    return out


def compactions(store: SessionStore, session: Session) -> list[Event]:
    return [e for e in store.get_session(*session.key).events if e.type == "compaction"]
