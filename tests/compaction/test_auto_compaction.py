"""Automatic compaction in-process (mnemoray.compaction.auto, compaction_policy): off the
appender's path, per-session policy, never two compactions of one window, no half event
after a crash, and agents that keep appending through their own copy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from mnemoray.compaction.auto import AutoCompactor, CompactionDone
from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.compaction.policy import create_session, effective_config
from mnemoray.compaction.timeline import Timeline
from mnemoray.errors import InvalidInput
from mnemoray.faults import CRASH_ENV, CRASH_EXIT_CODE
from mnemoray.sessions.events import Event
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.sessions.types import DuplicateEventError, StaleSessionError
from mnemoray.summarizers import ExtractiveSummarizer, Summary
from tests.support.compaction_helpers import Recording, compactions, poll, turns

ROOT = Path(__file__).parents[2]


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


def test_append_returns_at_once_and_the_compaction_lands_after(store) -> None:
    rec, done = Recording(), []
    auto = AutoCompactor(
        rec, CompactionConfig(interval=2, overlap=0), on_compacted=done.append
    ).attach(store)
    try:
        session = store.create_session("app", "ana", "s")
        rec.gate.clear()  # the summarizer is slow: it waits for us
        store.append_events(session, turns(5))  # returns although the summary is pending
        assert rec.entered.wait(5)
        assert compactions(store, session) == []  # a compile now uses the raw events
        rec.gate.set()
        assert poll(lambda: compactions(store, session))
        assert auto.wait_idle(5)
        event = compactions(store, session)[0]
        assert event.data["source_event_ids"] == ["u0", "m0", "u1", "m1"]
        assert event.data["trigger"] == "interval"
        assert [d.trigger for d in done] == ["interval"] and done[0].seconds >= 0
        assert done[0].compression_ratio == event.data["raw_tokens"] / 4
    finally:
        auto.stop()


def test_a_burst_coalesces_and_no_window_is_compacted_twice(store) -> None:
    rec = Recording()
    auto = AutoCompactor(rec, CompactionConfig(interval=1, overlap=0)).attach(store)
    try:
        session = store.create_session("app", "ana", "s")
        rec.gate.clear()
        for k in range(20):  # 20 appends while the first summary is held
            store.append_events(session, turns(1, k))
        rec.gate.set()
        assert auto.wait_idle(10)
        sources = [tuple(c.data["source_event_ids"]) for c in compactions(store, session)]
        flat = [i for s in sources for i in s]
        # Every event once, none twice, but the newest three invocations (kept raw).
        assert flat == [e.id for e in turns(17)]
        assert len(rec.windows) == len(sources)  # no summary was thrown away
    finally:
        auto.stop()


def test_two_replicas_on_one_store_never_compact_one_window_twice(tmp_path) -> None:
    # Two stores over one SQLite file, each with its own compactor: two replicas.
    a, b = SQLiteSessionStore(tmp_path / "s.db"), SQLiteSessionStore(tmp_path / "s.db")
    recs = [Recording(), Recording()]
    autos = [AutoCompactor(r, CompactionConfig(token_threshold=60, keep_last=2)) for r in recs]
    autos[0].attach(a)
    autos[1].attach(b)
    try:
        session_a = a.create_session("app", "ana", "s")
        for k in range(30):
            store = a if k % 2 == 0 else b
            copy = store.get_session(*session_a.key)
            store.append_events(copy, turns(1, k))
        assert all(auto.wait_idle(10) for auto in autos)
        # Each replica saw only its own appends: settle both on the final state.
        for auto, store in zip(autos, (a, b), strict=True):
            auto.compact_now(store, *session_a.key)
        comps = compactions(a, session_a)
        assert comps
        fresh = [set(c.data["source_event_ids"]) for c in comps]
        for i, x in enumerate(fresh):
            for y in fresh[i + 1 :]:
                assert x != y  # never the same window twice
    finally:
        for auto in autos:
            auto.stop()


def test_a_failing_summarizer_writes_nothing_and_the_next_append_retries(store) -> None:
    rec, errors = Recording(), []
    rec.fail = RuntimeError("model server down")
    auto = AutoCompactor(
        rec,
        CompactionConfig(interval=1, overlap=0, keep_last=1),
        on_error=lambda exc, key: errors.append((type(exc), key)),
    ).attach(store)
    try:
        session = store.create_session("app", "ana", "s")
        store.append_events(session, turns(2))
        assert poll(lambda: errors) and auto.wait_idle(5)
        assert errors[0] == (RuntimeError, ("app", "ana", "s"))
        assert compactions(store, session) == []
        rec.fail = None
        store.append_events(session, turns(1, 2))
        assert poll(lambda: compactions(store, session)) and auto.wait_idle(5)
        # The failed window was not lost: the retry covers it too.
        [event] = compactions(store, session)
        assert event.data["source_event_ids"] == ["u0", "m0", "u1", "m1"]
    finally:
        auto.stop()


CRASHING_RUN = """
import sys
from mnemoray.compaction.auto import AutoCompactor, CompactionDone
from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.summarizers import ExtractiveSummarizer, Summary
store = SQLiteSessionStore(sys.argv[1])
session = store.create_session("app", "ana", "s")
store.append_events(session, [user_message("I keep basil on the balcony.", invocation_id="i"),
                              model_message("agent", "Basil likes sun.", invocation_id="i"),
                              user_message("And mint?", invocation_id="j"),
                              model_message("agent", "Mint likes shade.", invocation_id="j")])
AutoCompactor(ExtractiveSummarizer(), CompactionConfig(interval=1, keep_last=1)).compact_now(
    store, "app", "ana", "s")
print("not reached")
"""


def test_a_crash_mid_compaction_leaves_no_half_event(tmp_path) -> None:
    db = tmp_path / "sessions.db"
    env = {**os.environ, CRASH_ENV: "compaction-summarized", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", CRASHING_RUN, str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == CRASH_EXIT_CODE, run.stderr
    store = SQLiteSessionStore(db)
    session = store.get_session("app", "ana", "s")
    assert [e.type for e in session.events] == ["message"] * 4  # summary lost, no half
    auto = AutoCompactor(ExtractiveSummarizer(), CompactionConfig(interval=1, keep_last=1))
    landed = auto.compact_now(store, "app", "ana", "s")
    assert len(landed) == 1 and len(compactions(store, session)) == 1


# -- policy: app default, session override ------------------------------------------------------
def test_a_session_policy_overrides_the_apps(store) -> None:
    rec = Recording()
    auto = AutoCompactor(
        rec, policy_for=lambda app: CompactionConfig(token_threshold=10_000)
    ).attach(store)
    try:
        policy = {"interval": 1, "overlap": 0, "keep_last": 1}
        own = create_session(store, "app", "ana", "own", compaction=policy)
        plain = create_session(store, "app", "ana", "plain")
        assert effective_config(CompactionConfig(token_threshold=10_000), own) == CompactionConfig(
            interval=1, overlap=0, keep_last=1, token_threshold=10_000
        )
        store.append_events(own, turns(2))
        store.append_events(plain, turns(2))
        assert poll(lambda: compactions(store, own)) and auto.wait_idle(5)
        assert compactions(store, plain) == []
    finally:
        auto.stop()


def test_a_bad_session_policy_names_the_key_and_creates_nothing(store) -> None:
    with pytest.raises(InvalidInput) as err:
        create_session(store, "app", "ana", "s", compaction={"keep_last": -1})
    assert err.value.field == "compaction.keep_last"
    with pytest.raises(InvalidInput) as err:
        create_session(store, "app", "ana", "s", compaction={"boundaries": ["sunset"]})
    assert err.value.field == "compaction.boundaries"
    with pytest.raises(InvalidInput) as err:
        create_session(store, "app", "ana", "s", compaction={"intervall": 2})
    assert err.value.field == "compaction.intervall"
    assert store.list_sessions("app") == []


# -- semantic boundaries ------------------------------------------------------------------------


def test_the_extractive_summarizer_runs_end_to_end(store) -> None:
    done: list[CompactionDone] = []
    auto = AutoCompactor(
        ExtractiveSummarizer(),
        CompactionConfig(token_threshold=80, keep_last=2),
        on_compacted=done.append,
    ).attach(store)
    try:
        session = store.create_session("app", "ana", "s")
        for k in range(12):
            store.append_events(
                session,
                turns(
                    1,
                    k,
                    text=lambda n: (
                        f"My parrot number {n} likes the quiet room near the balcony garden."
                    ),
                ),
            )
            # One append at a time: which windows get summarized must not hang on load.
            assert auto.wait_idle(10)
        assert done
        assert all(d.compression_ratio > 1 for d in done)
        final = store.get_session(*session.key)
        assert [e.id for e in final.events if e.type == "message"][-2:] == ["u11", "m11"]
    finally:
        auto.stop()


def test_an_agent_keeps_appending_through_its_own_copy(store) -> None:
    """Background compactions never make the agent's copy conflict; content still does."""
    config = CompactionConfig(interval=1, overlap=0, keep_last=1)
    auto = AutoCompactor(Recording(), config).attach(store)
    try:
        session = store.create_session("app", "ana", "s")
        store.append_events(session, turns(1))
        for k in range(1, 6):
            store.append_events(session, turns(1, k))  # the copy is behind by a compaction
            assert poll(
                lambda k=k: any(
                    f"m{k - 1}" in c.data["source_event_ids"] for c in compactions(store, session)
                )
            )
        assert auto.wait_idle(5)
        final = store.get_session(*session.key)
        assert [e.id for e in final.events if e.type == "message"] == [e.id for e in turns(6)]
        assert len(compactions(store, session)) == 5
        other = store.get_session(*session.key)
        store.append_events(other, turns(1, 9))
        with pytest.raises(StaleSessionError):  # behind on content: still a conflict
            store.append_events(session, turns(1, 10))
    finally:
        auto.stop()


class Wordy(Recording):
    """Summaries of a fixed, large size: they crowd a small budget."""

    def summarize(self, events: Sequence[Event]) -> Summary:
        super().summarize(events)
        return Summary(summary="parrots " * 60)


def long_turns(n: int, first: int = 0) -> list[Event]:
    """Turns long enough that a Wordy summary still shrinks its window (one that does
    not is never written)."""
    return turns(
        n,
        first,
        text=lambda k: f"Question {k}: which quiet rooms near the old garden do parrots like best?",
    )


def test_summaries_that_crowd_the_budget_are_rolled_up_into_one(store) -> None:
    compactor = Compactor(Wordy(), CompactionConfig(token_threshold=60, keep_last=2))
    session = store.create_session("app", "ana", "s")
    store.append_events(session, long_turns(6))
    first = compactor.maybe_compact(store, session)
    assert first is not None and first.data["source_event_ids"][0] == "u0"
    assert compactor.maybe_compact(store, session) is None  # summary + 2 kept: nothing to do
    store.append_events(session, long_turns(3, 6))
    second = compactor.maybe_compact(store, session)
    assert second is not None and second.data["source_event_ids"][0] == "u0"
    assert set(first.data["source_event_ids"]) < set(second.data["source_event_ids"])
    # Only the roll-up is shown by a compile (and counted against the budget).
    assert Timeline.of(session).summary_tokens() == second.data["summary_tokens"]


def test_a_roll_up_reads_the_summaries_and_new_events_not_the_whole_history(store) -> None:
    """An LLM backend refuses an ever larger prompt: a roll-up hands the summarizer the
    summaries a compile shows plus the events not yet covered, while its event still
    names every event it covers."""
    rec = Wordy()
    compactor = Compactor(rec, CompactionConfig(token_threshold=60, keep_last=2))
    session = store.create_session("app", "ana", "s")
    for k in range(15):
        store.append_events(session, long_turns(5, 5 * k))
        assert compactor.maybe_compact(store, session) is not None
    rolled = compactions(store, session)
    assert len(rolled) == 15 and len(session.events) > 100
    # Each input: the one summary shown plus the 5 turns none covers (2 of them were
    # kept raw last time, 2 new ones are kept now).
    assert max(len(w) for w in rec.windows) == 1 + 10
    for previous, current, window in zip(rolled[:-1], rolled[1:], rec.windows[1:], strict=True):
        assert window[0] == previous.id  # the summary, as the first input
        assert current.data["source_event_ids"][0] == "u0"
        assert set(previous.data["source_event_ids"]) < set(current.data["source_event_ids"])


# -- a bad policy never breaks appends ----------------------------------------------------------
def policy_control(policy: object) -> Event:
    return Event(
        author="user",
        role="system",
        type="control",
        data={"action": "compaction_policy", "policy": policy},
    )


@pytest.mark.parametrize(
    "policy",
    [{"boundaries": None}, {"boundaries": 5}, {"interval": "x"}, {"keep_last": [1]}, {"nope": 1}],
)
def test_a_stored_policy_that_cannot_be_read_leaves_the_apps(store, policy: dict) -> None:
    app = CompactionConfig(token_threshold=500)
    session = store.create_session("app", "ana", "s")
    store.append_event(session, policy_control(policy))
    assert effective_config(app, session) == app


def test_a_listener_that_raises_never_fails_a_stored_append(store, caplog) -> None:
    def broken(notice: object) -> None:
        raise TypeError("listener bug")

    store.add_listener(broken, ("appended", "ended", "deleted"))
    session = store.create_session("app", "ana", "s")
    with caplog.at_level("ERROR"):
        stored = store.append_events(session, turns(1))
        assert [e.id for e in stored] == ["u0", "m0"] and session.version == 2
        store.end_session(session)
        store.delete_session("app", "ana", "s")
    assert (
        sum(
            "listener bug" in r.getMessage()
            or (r.exc_info and "listener bug" in str(r.exc_info[1]))
            for r in caplog.records
        )
        == 3
    )


def test_a_bad_client_policy_event_never_fails_appends_with_compaction_on(store) -> None:
    """The app compacts by tokens: the worker reads the session's policy on every round."""
    errors: list[BaseException] = []
    auto = AutoCompactor(
        Recording(),
        CompactionConfig(interval=1, overlap=0, keep_last=1),
        on_error=lambda exc, key: errors.append(exc),
    ).attach(store)
    try:
        session = store.create_session("app", "ana", "s")
        store.append_event(session, policy_control({"boundaries": 5}))
        store.append_events(session, turns(2))
        assert poll(lambda: compactions(store, session)) and auto.wait_idle(5)
        assert errors == []
    finally:
        auto.stop()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_session_and_its_policy_are_written_in_one_commit(kind: str, tmp_path: Path) -> None:
    """No crash between two commits can leave a session silently on its app's policy."""
    store = (
        InMemorySessionStore() if kind == "memory" else SQLiteSessionStore(tmp_path / "sessions.db")
    )

    def crash(*args: object) -> None:
        raise RuntimeError("crashed after the session was created")

    store._append_many = crash  # type: ignore[method-assign]  # a second commit would crash
    session = create_session(
        store,
        "app",
        "ana",
        "s",
        state={"mood": "calm", "app:v": 1},
        compaction={"interval": 2, "overlap": 0},
    )
    fresh = store.get_session("app", "ana", "s")
    assert fresh.version == session.version == 1
    assert [e.to_dict() for e in fresh.events] == [e.to_dict() for e in session.events]
    assert fresh.state == session.state == {"mood": "calm", "app:v": 1}
    assert effective_config(CompactionConfig(), fresh) == CompactionConfig(interval=2, overlap=0)
    twice = Event(
        author="mnemoray",
        role="system",
        type="control",
        id="p",
        data={"action": "compaction_policy", "policy": {}},
    )
    with pytest.raises(DuplicateEventError):  # all or nothing: no session without its events
        store.create_session("app", "ana", "t", events=[twice, twice])
    assert [i.session_id for i in store.list_sessions("app")] == ["s"]
