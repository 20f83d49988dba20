from __future__ import annotations

from collections.abc import Sequence

import pytest

from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.compaction.timeline import event_tokens
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.summarizers import ExtractiveSummarizer, Summarizer, Summary


class RecordingSummarizer(Summarizer):
    """Remembers every window it was asked to summarize."""

    name = "recording"

    def __init__(self) -> None:
        self.windows: list[list[str]] = []

    def summarize(self, events: Sequence[Event]) -> Summary:
        self.windows.append([e.id for e in events])
        return Summary(
            summary=f"{len(events)} events", source_event_ids=tuple(e.id for e in events)
        )


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
def session(store: InMemorySessionStore) -> Session:
    return store.create_session("app", "maya", "s1")


def add(store: InMemorySessionStore, session: Session, clock: Clock, *events: Event) -> None:
    for event in events:
        store.append_event(session, Event.from_dict({**event.to_dict(), "timestamp": clock()}))


def turn(
    store: InMemorySessionStore, session: Session, clock: Clock, n: int, text: str | None = None
) -> None:
    """One complete invocation ``inv-n``: a user message and the model's answer."""
    inv = f"inv-{n}"
    add(
        store,
        session,
        clock,
        user_message(
            text or f"Question {n} about parrots and apartments?", id=f"u{n}", invocation_id=inv
        ),
        model_message(
            "agent", f"Answer {n}: parrots like quiet apartments.", id=f"m{n}", invocation_id=inv
        ),
    )


def ids(*invocations: int) -> list[str]:
    return [i for n in invocations for i in (f"u{n}", f"m{n}")]


def compactions(session: Session) -> list[Event]:
    return [e for e in session.events if e.type == "compaction"]


@pytest.mark.parametrize(
    "policy",
    [
        {"interval": 3, "overlap": 1},
        {"token_threshold": 150},
        {"boundaries": ("phrase",), "keep_last": 1},
        {"interval": 3, "overlap": 2, "token_threshold": 150, "boundaries": ("phrase",)},
    ],
    ids=["interval", "token_threshold", "phrase", "all"],
)
def test_every_trigger_keeps_the_newest_raw_and_covers_the_rest_once(
    store, session, policy: dict
) -> None:
    clock, config = Clock(), CompactionConfig(**policy)
    compactor = Compactor(RecordingSummarizer(), config)
    for n in range(1, 25):
        turn(store, session, clock, n, text=f"Let's move on to flat {n}." if n % 5 == 0 else None)
        while compactor.maybe_compact(store, session) is not None:  # as AutoCompactor does
            pass
        done = compactions(session)
        sources = [c.data["source_event_ids"] for c in done]
        covered = {i for s in sources for i in s}
        assert not covered & set(ids(*range(n - config.keep_last + 1, n + 1)))
        # Nothing lost: the covered events are all of those up to the last covered one.
        assert covered == set(ids(*range(1, n + 1))[: len(covered)])
        # Nothing twice, but the overlap an interval window opens with.
        for k, (c, s) in enumerate(zip(done, sources, strict=True)):
            again = [i for i in s if any(i in earlier for earlier in sources[:k])]
            overlap = config.overlap if c.data["trigger"] == "interval" else 0
            assert again == s[: len(again)] and len(again) <= 2 * overlap
    assert len(compactions(session)) >= 3


def test_sliding_windows_overlap_by_one_invocation(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=3, overlap=1))
    assert compactor.config.keep_last == 3  # the default: 5, 6 and 7 stay raw
    for n in range(1, 8):
        turn(store, session, clock, n)
    first = compactor.maybe_compact(store, session)
    assert first is not None and first.data["source_event_ids"] == ids(1, 2, 3, 4)
    for n in range(8, 11):
        turn(store, session, clock, n)
        if n < 10:  # two new invocations before the kept ones: below the interval
            assert compactor.maybe_compact(store, session) is None
    second = compactor.maybe_compact(store, session)
    assert second is not None and second.data["source_event_ids"] == ids(4, 5, 6, 7)
    assert rec.windows == [ids(1, 2, 3, 4), ids(4, 5, 6, 7)]
    # The event carries its window's time range and the summary.
    assert (
        second.data["start_ts"]
        == session.events[
            session.events.index(next(e for e in session.events if e.id == "u4"))
        ].timestamp
    )
    assert second.data["end_ts"] == next(e for e in session.events if e.id == "m7").timestamp
    assert second.text == "8 events" and second.data["summary"]["summary"] == "8 events"
    assert (second.author, second.role, second.type) == ("compactor", "system", "compaction")


@pytest.mark.parametrize("keep_last", [0, 1, 3])
def test_called_after_every_invocation_the_windows_lag_by_keep_last(
    store, session, keep_last: int
) -> None:
    """The same windows whatever keep_last (0 gives ADK's), each landing keep_last
    invocations later: the newest keep_last are never covered, and each window
    re-includes the last ``overlap`` invocations of the one before."""
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=3, overlap=1, keep_last=keep_last))
    for n in range(1, 10 + keep_last):
        turn(store, session, clock, n)
        compactor.maybe_compact(store, session)
        covered = {i for c in compactions(session) for i in c.data["source_event_ids"]}
        assert not covered & set(ids(*range(n - keep_last + 1, n + 1)))
        assert len(rec.windows) == max(0, (n - keep_last) // 3)
    assert rec.windows == [ids(1, 2, 3), ids(3, 4, 5, 6), ids(6, 7, 8, 9)]


def test_overlap_zero_and_no_compaction_below_interval(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=2, overlap=0))
    for n in range(1, 5):
        turn(store, session, clock, n)
    assert compactor.plan(session) is None  # only inv-1 is older than the kept three
    turn(store, session, clock, 5)
    assert compactor.maybe_compact(store, session) is not None
    turn(store, session, clock, 6)
    turn(store, session, clock, 7)
    assert compactor.maybe_compact(store, session) is not None
    assert rec.windows == [ids(1, 2), ids(3, 4)]


def test_the_invocation_in_progress_is_not_compacted(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    # Nothing kept: only its completion holds inv-3 back.
    compactor = Compactor(rec, CompactionConfig(interval=3, overlap=1, keep_last=0))
    turn(store, session, clock, 1)
    turn(store, session, clock, 2)
    add(
        store, session, clock, user_message("And a third question?", id="u3", invocation_id="inv-3")
    )
    assert compactor.plan(session) is None  # inv-3 has no answer yet
    add(
        store,
        session,
        clock,
        model_message("agent", "Third answer.", id="m3", invocation_id="inv-3"),
    )
    assert [e.id for e in compactor.plan(session)] == ids(1, 2, 3)


def test_the_invocation_in_progress_is_not_one_of_the_kept(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=2, overlap=0, keep_last=1))
    for n in range(1, 4):
        turn(store, session, clock, n)
    add(store, session, clock, user_message("A fourth?", id="u4", invocation_id="inv-4"))
    # The newest completed invocation (inv-3) stays raw, not just the open one.
    assert [e.id for e in compactor.plan(session)] == ids(1, 2)


def test_events_without_invocation_ids_group_by_user_message(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    for n in range(1, 7):
        add(
            store,
            session,
            clock,
            user_message(f"Question {n}?", id=f"u{n}"),
            model_message("agent", f"Answer {n}, part one.", id=f"m{n}"),
            model_message("agent", f"Answer {n}, part two.", id=f"x{n}"),
        )
    window = Compactor(rec, CompactionConfig(interval=3)).plan(session)  # 4-6 are kept
    assert window is not None
    assert [e.id for e in window] == [f"{p}{n}" for n in range(1, 4) for p in "umx"]


def test_token_threshold_keeps_the_last_invocations_raw(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(token_threshold=200, keep_last=2))
    long = "The apartment on Rua das Flores allows parrots and has a sunny balcony. " * 3
    for n in range(1, 4):
        turn(store, session, clock, n, text=long)
    total = sum(event_tokens(e) for e in session.events)
    assert total <= 200 and compactor.plan(session) is None
    for n in range(4, 7):
        turn(store, session, clock, n, text=long)
    event = compactor.maybe_compact(store, session)
    assert event is not None
    assert event.data["source_event_ids"] == ids(1, 2, 3, 4)  # inv-5 and inv-6 stay raw
    # Only what was not yet covered counts towards the next trigger.
    assert compactor.maybe_compact(store, session) is None
    turn(store, session, clock, 7, text=long)
    turn(store, session, clock, 8, text=long)
    again = compactor.maybe_compact(store, session)
    assert again is not None and again.data["source_event_ids"] == ids(5, 6)


class Padded(RecordingSummarizer):
    """Summaries of a fixed size, longer than one short turn."""

    def summarize(self, events: Sequence[Event]) -> Summary:
        super().summarize(events)
        return Summary(summary="parrots like quiet apartments " * 4)


def test_a_token_summary_that_would_not_shrink_its_window_is_not_written(store, session) -> None:
    """It would only grow what a compile shows; the next trigger takes a longer window."""
    clock, rec = Clock(), Padded()
    compactor = Compactor(rec, CompactionConfig(token_threshold=30, keep_last=1))
    turn(store, session, clock, 1)
    turn(store, session, clock, 2)
    assert [e.id for e in compactor.plan(session) or []] == ids(1)
    assert compactor.maybe_compact(store, session) is None  # one turn: shorter than the summary
    assert compactions(session) == [] and len(rec.windows) == 1
    turn(store, session, clock, 3)
    event = compactor.maybe_compact(store, session)
    assert event is not None and event.data["source_event_ids"] == ids(1, 2)
    assert event.data["summary_tokens"] < event.data["raw_tokens"]


def test_token_window_never_splits_a_call_from_its_result(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(token_threshold=50, keep_last=1))
    add(
        store,
        session,
        clock,
        user_message(
            "Find pet friendly apartments in Porto with a balcony please. " * 3,
            id="u1",
            invocation_id="i1",
        ),
        tool_call(
            "agent", "search", {"city": "Porto"}, call_id="c1", id="call", invocation_id="i1"
        ),
        model_message("agent", "Searching, this takes a while.", id="m1", invocation_id="i1"),
        user_message("Any news?", id="u2", invocation_id="i2"),
        tool_result("search", "search", {"hits": 3}, call_id="c1", id="result", invocation_id="i2"),
        model_message("agent", "Three apartments fit.", id="m2", invocation_id="i2"),
    )
    # Keeping i2 would cut between "call" and "result": the window shrinks instead.
    assert [e.id for e in compactor.plan(session)] == ["u1"]


@pytest.mark.parametrize("answered", [False, True])
def test_sliding_window_takes_an_existing_result_only_outside_the_kept(
    store, session, answered: bool
) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    # keep_last=1 keeps inv-3 once answered; unanswered, nothing is kept (keep_last=0).
    config = CompactionConfig(interval=2, overlap=0, keep_last=int(answered))
    compactor = Compactor(rec, config)
    turn(store, session, clock, 1)
    # A long-running tool: called in inv-2, its result arrives in inv-3.
    add(
        store,
        session,
        clock,
        user_message("Book it.", id="u2", invocation_id="inv-2"),
        tool_call(
            "agent", "book", {"hotel": "Flores"}, call_id="c9", id="call", invocation_id="inv-2"
        ),
        model_message("agent", "Booking started.", id="m2", invocation_id="inv-2"),
        user_message("Done yet?", id="u3", invocation_id="inv-3"),
        tool_result("book", "book", {"ok": True}, call_id="c9", id="result", invocation_id="inv-3"),
    )
    if answered:
        add(
            store, session, clock, model_message("agent", "Booked.", id="m3", invocation_id="inv-3")
        )
    window = compactor.plan(session)
    assert window is not None
    if answered:  # the result is in a kept invocation: the call stays raw with it
        assert [e.id for e in window] == ["u1", "m1", "u2"]
    else:  # extended to the result, the rest of inv-3 is still open
        assert [e.id for e in window] == ["u1", "m1", "u2", "call", "m2", "u3", "result"]


def test_sliding_window_shrinks_before_a_call_without_result(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=2, overlap=0, keep_last=1))
    turn(store, session, clock, 1)
    add(
        store,
        session,
        clock,
        user_message("Book it.", id="u2", invocation_id="inv-2"),
        tool_call(
            "agent", "book", {"hotel": "Flores"}, call_id="c9", id="call", invocation_id="inv-2"
        ),
        model_message(
            "agent", "Booking started, I will report back.", id="m2", invocation_id="inv-2"
        ),
        user_message("Thanks!", id="u3", invocation_id="inv-3"),
        model_message("agent", "You're welcome.", id="m3", invocation_id="inv-3"),
    )
    window = compactor.plan(session)
    assert window is not None and [e.id for e in window] == ["u1", "m1", "u2"]
    compactor.maybe_compact(store, session)
    # Once the result exists, the next window starts at the call, never at the result.
    add(
        store,
        session,
        clock,
        user_message("Any news?", id="u4", invocation_id="inv-4"),
        tool_result("book", "book", {"ok": True}, call_id="c9", id="result", invocation_id="inv-4"),
        model_message("agent", "Booked.", id="m4", invocation_id="inv-4"),
    )
    assert compactor.plan(session) is None  # inv-3 alone is new and older than the kept
    turn(store, session, clock, 5)
    window = compactor.plan(session)
    assert window is not None
    assert [e.id for e in window] == ["call", "m2", "u3", "m3", "u4", "result", "m4"]


def test_window_start_moves_back_to_include_the_call(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=3, overlap=1))
    # inv-2 calls a tool whose result lands in inv-3, the overlap invocation.
    turn(store, session, clock, 1)
    add(
        store,
        session,
        clock,
        user_message("Check the lease.", id="u2", invocation_id="inv-2"),
        tool_call("agent", "lease", {}, call_id="c1", id="call", invocation_id="inv-2"),
        model_message("agent", "Checking.", id="m2", invocation_id="inv-2"),
        user_message("Well?", id="u3", invocation_id="inv-3"),
        tool_result(
            "lease", "lease", {"pets": "allowed"}, call_id="c1", id="result", invocation_id="inv-3"
        ),
        model_message("agent", "Pets are allowed.", id="m3", invocation_id="inv-3"),
    )
    for n in range(4, 7):  # the kept ones
        turn(store, session, clock, n)
    compactor.maybe_compact(store, session)
    assert rec.windows == [["u1", "m1", "u2", "call", "m2", "u3", "result", "m3"]]
    for n in range(7, 10):
        turn(store, session, clock, n)
    compactor.maybe_compact(store, session)
    # The overlap (inv-3) would open with a result whose call is outside: the
    # start moves back to the call.
    assert rec.windows[1] == ["call", "m2", "u3", "result", "m3", *ids(4, 5, 6)]


def test_pending_confirmation_is_never_compacted(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(
        rec, CompactionConfig(interval=1, overlap=0, token_threshold=10, keep_last=0)
    )
    turn(store, session, clock, 1)
    add(
        store,
        session,
        clock,
        user_message("Pay the deposit of 900 EUR.", id="u2", invocation_id="inv-2"),
        tool_call("agent", "pay", {"eur": 900}, call_id="c5", id="call", invocation_id="inv-2"),
        tool_result(
            "pay",
            "pay",
            {"status": "needs confirmation"},
            call_id="c5",
            id="res",
            invocation_id="inv-2",
        ),
        Event(
            author="agent",
            role="system",
            type="control",
            id="ask",
            data={"action": "request_confirmation", "call_id": "c5"},
            invocation_id="inv-2",
        ),
        model_message("agent", "Please confirm the payment.", id="m2", invocation_id="inv-2"),
    )
    # inv-2 waits for the user: it is not complete, and its call stays raw.
    assert [e.id for e in compactor.plan(session)] == ["u1", "m1"]
    compactor.maybe_compact(store, session)
    turn(store, session, clock, 3)
    assert [e.id for e in compactor.plan(session)] == ["u2"]
    compactor.maybe_compact(store, session)
    # Still unanswered: nothing from the call on may be compacted, by either trigger.
    assert compactor.plan(session) is None
    add(
        store,
        session,
        clock,
        Event(
            author="user",
            role="user",
            type="control",
            id="yes",
            data={"action": "confirm", "call_id": "c5", "confirmed": True},
            invocation_id="inv-4",
        ),
        model_message("agent", "Paid.", id="m4", invocation_id="inv-4"),
    )
    window = compactor.plan(session)
    assert window is not None
    # Control events are never content: "ask" and "yes" are not summarized.
    assert [e.id for e in window] == ["call", "res", "m2", "u3", "m3", "m4"]


def test_raw_events_remain_and_compaction_is_idempotent(store, session) -> None:
    clock = Clock()
    compactor = Compactor(ExtractiveSummarizer(), CompactionConfig(interval=2, overlap=1))
    for n in range(1, 6):
        turn(store, session, clock, n, text=f"I have a parrot named Kiwi number {n}.")
    before = [e.id for e in session.events]
    event = compactor.maybe_compact(store, session)
    assert event is not None
    stored = store.get_session("app", "maya", "s1")
    assert [e.id for e in stored.events] == before + [event.id]
    assert [e.id for e in session.events] == before + [event.id]
    assert compactions(stored)[0].data == event.data
    assert compactor.maybe_compact(store, session) is None
    assert compactor.maybe_compact(store, stored) is None
    assert len(store.get_session("app", "maya", "s1").events) == len(before) + 1
    # The extractive summary keeps the user's facts with provenance.
    facts = event.data["summary"]["key_facts"]
    assert facts and all(f["source_event_ids"][0].startswith("u") for f in facts)


def test_compaction_events_and_partials_are_never_content(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    compactor = Compactor(rec, CompactionConfig(interval=2, overlap=1))
    for n in range(1, 6):
        turn(store, session, clock, n)
    compactor.maybe_compact(store, session)
    session.events.append(model_message("agent", "stream…", partial=True, id="p"))
    for n in range(6, 8):
        turn(store, session, clock, n)
    compactor.maybe_compact(store, session)
    assert rec.windows == [ids(1, 2), ids(2, 3, 4)]


def test_nothing_to_do_without_triggers(store, session) -> None:
    clock = Clock()
    for n in range(1, 20):
        turn(store, session, clock, n)
    assert Compactor(RecordingSummarizer(), CompactionConfig()).plan(session) is None


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"interval": 0}, "interval"),
        ({"overlap": -1}, "overlap"),
        ({"token_threshold": 0}, "token_threshold"),
        ({"keep_last": -2}, "keep_last"),
        ({"interval": "3"}, "interval"),
        ({"boundaries": None}, "boundaries"),  # a client's control event may hold anything
        ({"boundaries": 5}, "boundaries"),
        ({"boundaries": ["phrase", 3]}, "boundaries"),
        ({"boundaries": "phrase"}, "boundaries"),
    ],
)
def test_bad_config_is_a_clear_error(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"CompactionConfig.{field}"):
        CompactionConfig(**kwargs)


def test_a_compaction_without_source_ids_is_honoured_by_time_range(store, session) -> None:
    clock, rec = Clock(), RecordingSummarizer()
    for n in range(1, 7):
        turn(store, session, clock, n)
    end_ts = next(e for e in session.events if e.id == "m2").timestamp
    store.append_event(
        session,
        Event(
            author="importer",
            role="system",
            type="compaction",
            text="earlier",
            data={"start_ts": 0.0, "end_ts": end_ts},
        ),
    )
    window = Compactor(rec, CompactionConfig(interval=1, overlap=0)).plan(session)
    assert window is not None and [e.id for e in window] == ids(3)


def test_every_surface_reads_the_policy_fields_from_one_place() -> None:
    """In-process config, HTTP request and settings: same fields, defaults and bounds
    (the token trigger alone differs: off in-process, on in ``mnemoray serve``)."""
    from dataclasses import fields

    from mnemoray.compaction.fields import FIELDS, POLICY_FIELDS, SERVE_DEFAULTS
    from mnemoray.schemas.sessions import SessionCompactionIn
    from mnemoray.settings.compaction import AppCompactionSettings, CompactionSettings

    config, settings = CompactionConfig(), CompactionSettings()
    assert tuple(f.name for f in fields(CompactionConfig)) == POLICY_FIELDS
    assert tuple(SessionCompactionIn.model_fields) == POLICY_FIELDS
    assert set(POLICY_FIELDS) <= set(AppCompactionSettings.model_fields)
    assert config.keep_last == settings.keep_last == 3
    request = SessionCompactionIn()
    for name in POLICY_FIELDS:
        assert config.to_dict()[name] == request.model_dump()[name]
        expected = SERVE_DEFAULTS.get(name, config.to_dict()[name])
        assert getattr(settings, name) == expected, name
        assert settings.policy_for("any").to_dict()[name] == expected
        for model in (SessionCompactionIn, CompactionSettings, AppCompactionSettings):
            metadata = model.model_fields[name].metadata
            bounds = tuple(
                next((getattr(m, b) for m in metadata if hasattr(m, b)), None) for b in ("ge", "le")
            )
            assert bounds == (FIELDS[name].ge, FIELDS[name].le), (model, name)
