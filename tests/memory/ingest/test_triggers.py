"""Ingestion triggers on real session stores (in-memory and SQLite)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemoray.memory.ingest.triggers import IngestionTrigger, TriggerConfig
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore, SessionStore
from mnemoray.summarizers import ExtractiveSummarizer

APP, USER = "bird-chat", "maya"
SUMMARIZER = ExtractiveSummarizer()
Key = tuple[str, str, str]


class Memories:
    """A real (tiny) ingest target honouring the trigger contract: add what is
    new by content hash, drop this session's records the new distillation no
    longer produces."""

    def __init__(self, fail: int = 0) -> None:
        self.records: dict[Key, dict[str, Memory]] = {}
        self.calls: list[tuple[Key, int, bool]] = []
        self.forgotten: list[Key] = []
        self.fail = fail  # the first N calls raise
        self.ingested = threading.Event()
        self._lock = threading.Lock()

    def add_session(self, session: Session) -> list[str]:
        with self._lock:
            self.calls.append((session.key, len(session.events), session.ended))
            if self.fail:
                self.fail -= 1
                raise RuntimeError("memory store is down")
            fresh = {
                m.memory_id: m
                for m in distill_session(
                    session, SUMMARIZER, chunk_turns=2, chunk_overlap=0, now=0.0
                )
            }
            current = self.records.setdefault(session.key, {})
            added = [i for i in fresh if i not in current]
            for stale in set(current) - set(fresh):
                del current[stale]
            current.update({i: fresh[i] for i in added})
        self.ingested.set()
        return added

    def forget_session(self, app_name: str, user_id: str, session_id: str) -> int:
        key = (app_name, user_id, session_id)
        self.forgotten.append(key)
        return len(self.records.pop(key, {}))


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    sqlite_store = SQLiteSessionStore(tmp_path / "sessions.db")
    yield sqlite_store
    sqlite_store.close()


def chat(store: SessionStore, session: Session, *texts: str) -> None:
    """Alternate user and model messages."""
    for i, text in enumerate(texts):
        event: Event = user_message(text) if i % 2 == 0 else model_message("assistant", text)
        store.append_event(session, event)


def trigger_for(memories: Memories, **config: object) -> IngestionTrigger:
    return IngestionTrigger(
        TriggerConfig(**config),
        memories.add_session,  # type: ignore[arg-type]
        memories.forget_session,
    )


def test_session_end_ingests_once_and_delete_forgets(store: SessionStore) -> None:
    memories = Memories()
    trigger_for(memories, type="session_end").attach(store)
    s = store.create_session(APP, USER, "s1")
    chat(
        store,
        s,
        "I'm thinking about getting a pet parrot.",
        "Parrots need attention.",
        "My apartment is small though.",
        "Consider a budgie.",
    )
    assert memories.calls == []  # nothing before the end
    store.end_session(s)
    assert memories.calls == [((APP, USER, "s1"), 4, True)]
    kinds = sorted(m.kind for m in memories.records[(APP, USER, "s1")].values())
    assert kinds == ["chunk", "chunk", "fact", "fact", "session_summary"]

    store.delete_session(APP, USER, "s1")
    assert memories.forgotten == [(APP, USER, "s1")]
    assert (APP, USER, "s1") not in memories.records


def test_ended_session_is_ingested_complete_even_from_a_stale_copy(store: SessionStore) -> None:
    memories = Memories()
    trigger_for(memories).attach(store)
    s = store.create_session(APP, USER, "s1")
    stale = store.get_session(APP, USER, "s1")
    chat(store, s, "I moved to Madrid in March.", "Noted.")
    store.end_session(stale)  # this copy never saw the two messages
    assert memories.calls == [((APP, USER, "s1"), 2, True)]


def test_message_count_ingests_every_n_messages(store: SessionStore) -> None:
    memories = Memories()
    trigger = trigger_for(memories, type="message_count", message_count=2).attach(store)
    s = store.create_session(APP, USER, "s1")
    store.append_event(s, user_message("I'm allergic to peanuts."))
    assert memories.calls == []
    # Tool traffic and streaming fragments are not messages.
    store.append_event(s, tool_call("assistant", "lookup", {"q": "peanuts"}, call_id="c"))
    store.append_event(s, tool_result("lookup", "lookup", "ok", call_id="c"))
    store.append_event(s, model_message("assistant", "Noted", partial=True))
    assert memories.calls == []
    store.append_event(s, model_message("assistant", "Noted, no peanuts."))
    assert memories.calls == [((APP, USER, "s1"), 4, False)]
    chat(store, s, "My daughter's name is Ana.")
    assert len(memories.calls) == 1
    store.append_event(s, model_message("assistant", "Hello Ana!"))
    assert [c[1] for c in memories.calls] == [4, 6]
    first_ids = set(memories.records[(APP, USER, "s1")])
    assert trigger.last_ingested(APP, USER, "s1") is not None

    store.end_session(s)  # an ended session is always ingested, complete
    assert memories.calls[-1] == ((APP, USER, "s1"), 6, True)
    # Unchanged content: re-ingestion is idempotent by content hash.
    assert set(memories.records[(APP, USER, "s1")]) == first_ids


def test_on_event_works_without_a_store() -> None:
    memories = Memories()
    trigger = trigger_for(memories, type="message_count", message_count=3)
    session = Session(APP, USER, "s1")
    for i in range(7):
        session.apply(
            user_message(f"I like parrot number {i}.")
            if i % 2 == 0
            else model_message("assistant", "Nice.")
        )
        trigger.on_event(session)
    assert [c[1] for c in memories.calls] == [3, 6]
    assert trigger_for(Memories(), type="session_end").on_event(session) is False


def test_inactivity_ingests_idle_changed_sessions(store: SessionStore) -> None:
    memories = Memories()
    trigger = trigger_for(memories, type="inactivity", inactivity_s=600).attach(store)
    idle = store.create_session(APP, USER, "idle")
    chat(store, idle, "I'm thinking about getting a pet parrot.", "Parrots are loud.")
    store.create_session(APP, USER, "empty")
    ended = store.create_session(APP, USER, "ended")
    chat(store, ended, "I prefer trains.")
    store.end_session(ended)
    memories.calls.clear()  # the "ended" notice ingested that one already

    start = time.time()
    assert trigger.poll(store, now=start + 60) == []  # not idle long enough
    assert trigger.poll(store, now=start + 3600) == [(APP, USER, "idle")]
    assert memories.calls == [((APP, USER, "idle"), 2, False)]
    assert trigger.poll(store, now=start + 7200) == []  # unchanged since

    chat(store, idle, "My apartment is small though.")
    assert trigger.poll(store, now=time.time() + 60) == []
    assert trigger.poll(store, now=time.time() + 3600) == [(APP, USER, "idle")]
    assert [c[1] for c in memories.calls] == [2, 3]


def test_inactivity_poll_of_an_unattached_store_needs_app_names(store: SessionStore) -> None:
    memories = Memories()
    trigger = trigger_for(memories, type="inactivity", inactivity_s=0)
    s = store.create_session(APP, USER, "s1")
    chat(store, s, "I live in Lisbon.")
    later = time.time() + 10
    assert trigger.poll(store, now=later) == []  # no app known yet
    assert trigger.poll(store, now=later, app_names=[APP]) == [(APP, USER, "s1")]
    configured = trigger_for(Memories(), type="inactivity", inactivity_s=0, app_names=(APP,))
    assert configured.poll(store, now=later) == [(APP, USER, "s1")]


def test_background_poller_ingests_and_stops(store: SessionStore) -> None:
    memories = Memories()
    trigger = trigger_for(memories, type="inactivity", inactivity_s=0).attach(store)
    s = store.create_session(APP, USER, "s1")
    chat(store, s, "I'm vegetarian.", "Noted.")
    thread = trigger.start_background(store, interval_s=0.02)
    with pytest.raises(RuntimeError, match="already running"):
        trigger.start_background(store, interval_s=0.02)
    assert memories.ingested.wait(10)
    trigger.stop()
    assert not thread.is_alive()
    assert memories.calls[0] == ((APP, USER, "s1"), 2, False)
    calls = len(memories.calls)
    time.sleep(0.1)
    assert len(memories.calls) == calls  # unchanged sessions are not re-ingested


def test_grown_session_keeps_identical_records_and_replaces_superseded(store: SessionStore) -> None:
    memories = Memories()
    trigger_for(memories, type="message_count", message_count=2).attach(store)
    s = store.create_session(APP, USER, "s1")
    chat(store, s, "I'm thinking about getting a pet parrot.", "Parrots need attention.")
    first = dict(memories.records[(APP, USER, "s1")])
    chat(store, s, "I moved to Madrid in March.", "Madrid is lovely.")
    second = memories.records[(APP, USER, "s1")]
    chunk = next(i for i, m in first.items() if m.kind == "chunk")
    assert chunk in second  # the full first window is identical: kept
    old_summary = next(i for i, m in first.items() if m.kind == "session_summary")
    assert old_summary not in second  # superseded, replaced by the ingest callable
    assert sum(m.kind == "session_summary" for m in second.values()) == 1


def test_failing_ingest_is_reported_and_retried(store: SessionStore) -> None:
    memories = Memories(fail=1)
    errors: list[tuple[str, Key]] = []
    trigger = IngestionTrigger(
        TriggerConfig(type="message_count", message_count=1),
        memories.add_session,
        memories.forget_session,
        on_error=lambda exc, key: errors.append((str(exc), key)),
    )
    trigger.attach(store)
    s = store.create_session(APP, USER, "s1")
    store.append_event(s, user_message("I'm allergic to peanuts."))  # the write still works
    assert errors == [("memory store is down", (APP, USER, "s1"))]
    assert trigger.last_ingested(APP, USER, "s1") is None
    store.append_event(s, model_message("assistant", "Noted."))
    assert [c[1] for c in memories.calls] == [1, 2]
    assert memories.records[(APP, USER, "s1")]


def test_detach_and_listener_opt_in(store: SessionStore) -> None:
    memories = Memories()
    trigger = trigger_for(memories).attach(store)
    trigger.attach(store)  # attaching twice is a no-op
    trigger.detach(store)
    s = store.create_session(APP, USER, "s1")
    chat(store, s, "I live in Lisbon.")
    store.end_session(s)
    assert memories.calls == []
    # Plain listeners still only hear ended/deleted, never appends.
    notices: list[str] = []
    store.add_listener(lambda n: notices.append(n.change))
    t = store.create_session(APP, USER, "s2")
    chat(store, t, "hello")
    store.end_session(t)
    assert notices == ["ended"]
    with pytest.raises(ValueError, match="unknown session change"):
        store.add_listener(print, changes=("created",))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"type": "hourly"}, "type"),
        ({"inactivity_s": -1}, "inactivity_s"),
        ({"message_count": 0}, "message_count"),
        ({"app_names": "bird-chat"}, "app_names"),
    ],
)
def test_bad_config(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TriggerConfig(**kwargs)
