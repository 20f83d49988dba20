"""One suite for every SessionStore: in-memory and SQLite behave the same."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemoray.errors import ConfigError
from mnemoray.sessions.events import Event, EventError, model_message, tool_call, user_message
from mnemoray.sessions.session import Session, SessionError
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore, SessionStore
from mnemoray.sessions.types import (
    DuplicateEventError,
    SessionEndedError,
    SessionExistsError,
    SessionNotFoundError,
    SessionNotice,
    StaleSessionError,
)

APP, USER = "travel", "maya"


@pytest.fixture
def store(any_session_store: SessionStore) -> SessionStore:
    return any_session_store  # every SessionStore (tests/conftest.py)


def append_with_retry(
    store: SessionStore, key: tuple[str, str, str], make_event: Callable[[], Event]
) -> None:
    """Append one event, reloading and retrying on StaleSessionError."""
    session = store.get_session(*key)
    while True:
        try:
            store.append_event(session, make_event())
            return
        except StaleSessionError:
            session = store.get_session(*key)


# -- create / get / list / end / delete -----------------------------------------
def test_create_get_round_trip(store: SessionStore) -> None:
    created = store.create_session(APP, USER, "s1", state={"topic": "lisbon"})
    assert created.key == (APP, USER, "s1")
    assert created.state == {"topic": "lisbon"} and created.version == 0
    e1 = store.append_event(created, user_message("Find me a flight", timestamp=100.0))
    call = tool_call("travel_agent", "search_flights", {"to": "LIS"}, call_id="c1", timestamp=101.0)
    store.append_event(created, call)
    store.append_event(
        created,
        model_message(
            "travel_agent", "TAP at 89 EUR", timestamp=102.0, state_delta={"topic": "booking"}
        ),
    )
    assert created.version == 3

    loaded = store.get_session(APP, USER, "s1")
    assert loaded.version == 3
    assert [e.id for e in loaded.events] == [e1.id, call.id, created.events[2].id]
    assert loaded.events == created.events
    assert loaded.events[1].data == {
        "name": "search_flights",
        "args": {"to": "LIS"},
        "call_id": "c1",
    }
    assert all(e.session_id == "s1" for e in loaded.events)
    assert loaded.state == {"topic": "booking"}
    assert loaded.created_at == created.created_at
    assert loaded.updated_at == max(created.created_at, 102.0)
    assert loaded.ended_at is None


def test_generated_id_and_missing_session(store: SessionStore) -> None:
    s = store.create_session(APP, USER)
    assert s.session_id and store.get_session(APP, USER, s.session_id).session_id == s.session_id
    with pytest.raises(SessionNotFoundError, match="nope"):
        store.get_session(APP, USER, "nope")
    with pytest.raises(SessionNotFoundError):
        store.get_session(APP, "other-user", s.session_id)  # the key includes the user


def test_create_existing_and_invalid(store: SessionStore) -> None:
    store.create_session(APP, USER, "s1")
    with pytest.raises(SessionExistsError, match="s1"):
        store.create_session(APP, USER, "s1")
    with pytest.raises(SessionError, match="app_name"):
        store.create_session("", USER, "s2")
    assert [i.session_id for i in store.list_sessions(APP)] == ["s1"]


def test_list_sessions(store: SessionStore) -> None:
    a = store.create_session(APP, USER, "a")
    store.create_session(APP, USER, "b")
    store.create_session(APP, "lee", "c")
    store.create_session("other-app", USER, "d")
    store.append_event(a, user_message("hi", timestamp=5.0))
    assert [i.session_id for i in store.list_sessions(APP)] == ["a", "b", "c"]
    assert [i.session_id for i in store.list_sessions(APP, USER)] == ["a", "b"]
    assert store.list_sessions("no-such-app") == []
    info = store.list_sessions(APP, USER)[0]
    assert (info.app_name, info.user_id, info.num_events, info.ended_at) == (APP, USER, 1, None)
    assert info.created_at == a.created_at


def test_end_and_delete_notify_listeners(store: SessionStore) -> None:
    notices: list[SessionNotice] = []
    store.add_listener(notices.append)
    s = store.create_session(APP, USER, "s1")
    store.append_event(s, user_message("bye", timestamp=1.0))
    store.end_session(s, ended_at=50.0)
    assert s.ended_at == 50.0
    assert store.get_session(APP, USER, "s1").ended_at == 50.0
    assert store.list_sessions(APP)[0].ended_at == 50.0
    with pytest.raises(SessionEndedError):
        store.append_event(s, user_message("late"))
    store.end_session(s)  # ending twice is a no-op, no second notice
    assert [(n.change, n.session_id) for n in notices] == [("ended", "s1")]
    assert notices[0].session is not None and len(notices[0].session.events) == 1

    store.delete_session(APP, USER, "s1")
    assert [(n.change, n.session_id, n.session) for n in notices[1:]] == [("deleted", "s1", None)]
    with pytest.raises(SessionNotFoundError):
        store.get_session(APP, USER, "s1")
    assert store.list_sessions(APP) == []
    with pytest.raises(SessionNotFoundError):
        store.delete_session(APP, USER, "s1")
    assert len(notices) == 2  # a failed delete notifies nobody


def test_append_to_session_ended_through_another_copy(store: SessionStore) -> None:
    s = store.create_session(APP, USER, "s1")
    other = store.get_session(APP, USER, "s1")
    store.end_session(s)
    with pytest.raises(SessionEndedError):
        store.append_event(other, user_message("too late"))
    assert store.get_session(APP, USER, "s1").events == []


def test_delete_removes_events(store: SessionStore) -> None:
    s = store.create_session(APP, USER, "s1")
    store.append_event(s, user_message("one", id="e1"))
    store.delete_session(APP, USER, "s1")
    again = store.create_session(APP, USER, "s1")
    assert again.events == [] and again.version == 0
    store.append_event(again, user_message("one again", id="e1"))  # old id is gone too
    assert [e.text for e in store.get_session(APP, USER, "s1").events] == ["one again"]


def test_duplicate_event_id_refused(store: SessionStore) -> None:
    s = store.create_session(APP, USER, "s1")
    for i in range(70):  # more than any "recent events" window
        store.append_event(s, user_message(f"m{i}", id=f"e{i}"))
    with pytest.raises(DuplicateEventError, match="e0"):
        store.append_event(s, user_message("again", id="e0"))
    loaded = store.get_session(APP, USER, "s1")
    assert loaded.version == 70 and s.version == 70
    # The same id in another session is fine.
    other = store.create_session(APP, USER, "s2")
    store.append_event(other, user_message("m0", id="e0"))


def test_partial_events_not_persisted(store: SessionStore) -> None:
    s = store.create_session(APP, USER, "s1")
    chunk = model_message("agent", "Lis", partial=True, state_delta={"x": 1})
    returned = store.append_event(s, chunk)
    assert returned.session_id == "s1"
    assert s.events == [] and s.version == 0 and "x" not in s.state
    store.append_event(s, model_message("agent", "Lisbon", state_delta={"x": 2}))
    loaded = store.get_session(APP, USER, "s1")
    assert [e.text for e in loaded.events] == ["Lisbon"] and loaded.state == {"x": 2}


# -- scoped state ---------------------------------------------------------------------
def test_scoped_state(store: SessionStore) -> None:
    s1 = store.create_session(
        APP,
        USER,
        "s1",
        state={"user:name": "Maya", "app:model": "m1", "draft": "a", "temp:scratch": 1},
    )
    assert s1.state == {"user:name": "Maya", "app:model": "m1", "draft": "a"}
    store.append_event(
        s1,
        user_message(
            "I moved",
            state_delta={
                "user:home": "Lisbon",
                "app:greeting": "hi",
                "leg": 1,
                "temp:step": "plan",
            },
        ),
    )
    # temp: reaches the in-memory copy of this invocation only.
    assert s1.state["temp:step"] == "plan"
    reloaded = store.get_session(APP, USER, "s1")
    assert reloaded.state == {
        "user:name": "Maya",
        "user:home": "Lisbon",
        "app:model": "m1",
        "app:greeting": "hi",
        "draft": "a",
        "leg": 1,
    }
    # Nor is it kept in the stored event: the record of what happened, minus temp:.
    assert reloaded.events[0].state_delta == {
        "user:home": "Lisbon",
        "app:greeting": "hi",
        "leg": 1,
    }
    assert s1.events == reloaded.events  # the caller's copy holds the stored events

    same_user = store.create_session(APP, USER, "s2")
    assert same_user.state == {
        "user:name": "Maya",
        "user:home": "Lisbon",
        "app:model": "m1",
        "app:greeting": "hi",
    }
    other_user = store.create_session(APP, "lee", "s3")
    assert other_user.state == {"app:model": "m1", "app:greeting": "hi"}
    other_app = store.create_session("other-app", USER, "s4")
    assert other_app.state == {}

    # A later user: write is visible in the user's older sessions on reload.
    store.append_event(other_user, user_message("x", state_delta={"user:name": "Lee"}))
    store.append_event(same_user, user_message("y", state_delta={"user:name": "M."}))
    assert store.get_session(APP, USER, "s1").state["user:name"] == "M."
    assert store.get_session(APP, "lee", "s3").state["user:name"] == "Lee"


# -- optimistic concurrency -------------------------------------------------------------
def test_stale_writer_refused_then_succeeds_after_reload(store: SessionStore) -> None:
    store.create_session(APP, USER, "s1")
    a = store.get_session(APP, USER, "s1")
    b = store.get_session(APP, USER, "s1")
    store.append_event(a, user_message("from A", id="a1", state_delta={"k": "A"}))
    with pytest.raises(StaleSessionError, match="reload"):
        store.append_event(b, user_message("from B", id="b1", state_delta={"k": "B"}))
    assert b.version == 0 and b.events == []  # the failed copy is untouched
    assert store.get_session(APP, USER, "s1").state == {"k": "A"}
    b = store.get_session(APP, USER, "s1")
    store.append_event(b, user_message("from B", id="b1", state_delta={"k": "B"}))
    final = store.get_session(APP, USER, "s1")
    assert [e.id for e in final.events] == ["a1", "b1"]
    assert final.version == 2 and final.state == {"k": "B"}


def test_threads_append_without_losing_events(store: SessionStore) -> None:
    store.create_session(APP, USER, "s1")
    n_threads, per_thread = 6, 15
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for m in range(per_thread):
                append_with_retry(
                    store,
                    (APP, USER, "s1"),
                    lambda t=t, m=m: user_message(
                        f"{t}-{m}", id=f"t{t}m{m}", state_delta={f"last{t}": m}
                    ),
                )
        except BaseException as exc:  # surfaced below: a thread cannot fail the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    final = store.get_session(APP, USER, "s1")
    assert final.version == len(final.events) == n_threads * per_thread
    assert {e.id for e in final.events} == {
        f"t{t}m{m}" for t in range(n_threads) for m in range(per_thread)
    }
    for t in range(n_threads):  # each thread's events keep their order
        mine = [e.id for e in final.events if e.id.startswith(f"t{t}m")]
        assert mine == [f"t{t}m{m}" for m in range(per_thread)]
        assert final.state[f"last{t}"] == per_thread - 1


# -- SQLite only ----------------------------------------------------------------------------
def _process_writer(path: str, worker: int, count: int, start: Any) -> None:
    store = SQLiteSessionStore(path)
    start.wait()  # all writers begin together, so they really contend
    for m in range(count):
        append_with_retry(
            store,
            (APP, USER, "shared"),
            lambda m=m: user_message(f"{worker}-{m}", id=f"p{worker}m{m}"),
        )
    store.close()


def test_sqlite_processes_share_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "sessions.db")
    with SQLiteSessionStore(path) as store:
        store.create_session(APP, USER, "shared")
    n_procs, per_proc = 3, 20
    ctx = multiprocessing.get_context("spawn")  # no inherited SQLite handles
    start = ctx.Barrier(n_procs)
    procs = [
        ctx.Process(target=_process_writer, args=(path, w, per_proc, start)) for w in range(n_procs)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * n_procs
    with SQLiteSessionStore(path) as store:
        final = store.get_session(APP, USER, "shared")
    assert final.version == n_procs * per_proc
    assert sorted(e.id for e in final.events) == sorted(
        f"p{w}m{m}" for w in range(n_procs) for m in range(per_proc)
    )


def _forked_writer(store: SQLiteSessionStore, count: int) -> None:
    for m in range(count):
        append_with_retry(store, (APP, USER, "s1"), lambda m=m: user_message(f"child {m}"))


def test_sqlite_store_survives_fork(tmp_path: Path) -> None:
    # A store object used before a fork keeps working in the child (fresh connections).
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        s = store.create_session(APP, USER, "s1")
        store.append_event(s, user_message("parent"))
        child = multiprocessing.get_context("fork").Process(target=_forked_writer, args=(store, 5))
        child.start()
        child.join(timeout=30)
        assert child.exitcode == 0
        final = store.get_session(APP, USER, "s1")
        assert [e.text for e in final.events] == ["parent"] + [f"child {m}" for m in range(5)]


def test_sqlite_reload_from_new_store(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "sessions.db"  # parent folders are created
    with SQLiteSessionStore(path) as store:
        s = store.create_session(
            APP, USER, "s1", state={"user:name": "Maya", "app:v": 2, "draft": True}
        )
        store.append_event(
            s, user_message("hello", id="e1", timestamp=10.0, state_delta={"temp:t": 1, "n": 1})
        )
        store.append_event(
            s,
            tool_call(
                "agent",
                "lookup",
                {"q": "ü"},
                call_id="c9",
                timestamp=11.0,
                artifact_delta={"plan.md": 2},
            ),
        )
        store.end_session(s, ended_at=20.0)
        before = store.get_session(APP, USER, "s1")
    with SQLiteSessionStore(path) as reopened:
        after = reopened.get_session(APP, USER, "s1")
        assert reopened.list_sessions(APP)[0].num_events == 2
    assert after == before
    assert after.state == {"user:name": "Maya", "app:v": 2, "draft": True, "n": 1}
    assert after.events[1].artifact_delta == {"plan.md": 2}
    assert after.ended_at == 20.0
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"sessions", "events", "app_state", "user_state"} <= tables
        # temp: keys are never written anywhere but inside the event record.
        stored = conn.execute("SELECT state FROM sessions").fetchone()[0]
        assert "temp:" not in stored
    finally:
        conn.close()


SECRET = "pin-7731-do-not-store"


def test_temp_state_reaches_no_store(store: SessionStore) -> None:
    s = store.create_session(
        APP,
        USER,
        "s1",
        state={"temp:boot": SECRET},
        events=[user_message("hi", id="e0", state_delta={"temp:first": SECRET, "a": 1})],
    )
    done = store.append_events(
        s,
        [
            user_message("my pin", id="e1", state_delta={"temp:pin": SECRET, "n": 1}),
            user_message("partial", partial=True, state_delta={"temp:pin": "streamed"}),
        ],
    )
    # This invocation still sees its temp: value; the event it got back is the stored one.
    assert s.state["temp:pin"] == SECRET and s.state["n"] == 1
    assert done[0].state_delta == {"n": 1} and done[1].partial
    loaded = store.get_session(APP, USER, "s1")
    assert loaded.state == {"a": 1, "n": 1}
    assert [e.state_delta for e in loaded.events] == [{"a": 1}, {"n": 1}]
    assert SECRET not in repr(store.created_state(APP, USER, "s1"))
    if isinstance(store, InMemorySessionStore):  # what it keeps, not only what it answers
        assert SECRET not in repr(vars(store)) and "temp:" not in repr(vars(store))


def test_temp_state_not_in_sqlite_files(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = SQLiteSessionStore(path)
    try:
        s = store.create_session(APP, USER, "s1")
        store.append_event(
            s, user_message("here is my pin", state_delta={"temp:pin": SECRET, "n": 1})
        )
        assert s.state["temp:pin"] == SECRET
        # Read while the store is open: the WAL still holds the append (not checkpointed).
        wal = Path(f"{path}-wal").read_bytes()
        assert b"here is my pin" in wal  # the event is there, its temp: state is not
        raw = path.read_bytes() + wal
    finally:
        store.close()
    for data in (raw, path.read_bytes()):
        assert SECRET.encode() not in data and b"temp:pin" not in data


def test_sqlite_unserializable_value_writes_nothing(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        s = store.create_session(APP, USER, "s1")
        with pytest.raises(EventError, match=r"state_delta\.user:blob"):
            store.append_event(s, user_message("x", state_delta={"user:blob": object()}))
        with pytest.raises(EventError, match=r"^data"):
            store.append_event(s, Event(author="a", data={"raw": b"bytes"}))
        loaded = store.get_session(APP, USER, "s1")
        assert loaded.version == 0 and loaded.events == [] and loaded.state == {}
        with pytest.raises(EventError, match=r"state\.app:x"):
            store.create_session(APP, USER, "s2", state={"app:x": {1, 2}})
        assert [i.session_id for i in store.list_sessions(APP)] == ["s1"]


def test_sqlite_closed_store_refuses_use(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.get_session(APP, USER, "s1")
    with pytest.raises(ValueError, match="path"):
        SQLiteSessionStore("")  # would be a separate temp database per connection


def test_session_from_store_is_plain_session(store: SessionStore) -> None:
    s = store.create_session(APP, USER, "s1")
    assert isinstance(store.get_session(APP, USER, "s1"), Session)
    assert isinstance(s, Session)


def test_sqlite_refuses_a_url_instead_of_making_a_file_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("postgresql://db.example/sessions", Path("postgresql://db.example/sessions")):
        with pytest.raises(ConfigError, match="not supported here; give a file path") as raised:
            SQLiteSessionStore(url)
        assert raised.value.field == "path"
    assert list(tmp_path.iterdir()) == []  # no postgresql:/ folder appeared
    SQLiteSessionStore(":memory:").close()  # SQLite's own name, not a URL
