"""Semantic boundaries: an explicit phrase, task completion and a topic shift
(the injected embedder, the packaged one, the lexical fallback) close a segment; the
other triggers still bound windows."""

from __future__ import annotations

import numpy as np
import pytest

from mnemoray.compaction.auto import AutoCompactor
from mnemoray.compaction.boundaries import (
    CachedEncoder,
    find_boundaries,
    hashed_encode,
    marks_task_done,
    says_move_on,
)
from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.compaction.timeline import Timeline
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import InMemorySessionStore
from tests.support.compaction_helpers import Recording, turns


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


def test_phrase_and_task_done_markers() -> None:
    assert says_move_on(user_message("Great. Let's move on to the budget."))
    assert says_move_on(user_message("ok, new topic: flights"))
    assert says_move_on(user_message("Let\u2019s switch to something else"))
    assert not says_move_on(user_message("I am moving to Lisbon"))
    assert not says_move_on(model_message("agent", "Let's move on to the budget."))
    assert marks_task_done(
        model_message(
            "agent",
            "Task complete: booked.",
        )
    )
    assert marks_task_done(model_message("agent", "ok", data={"task_done": True}))
    assert marks_task_done(tool_result("agent", "book", {"status": "completed"}, "c1"))
    assert marks_task_done(
        Event(author="agent", role="system", type="control", data={"action": "task_done"})
    )
    assert not marks_task_done(tool_result("agent", "book", {"status": "pending"}, "c1"))
    assert not marks_task_done(user_message("Task complete?"))


def test_a_phrase_closes_the_segment_before_it(store) -> None:
    rec = Recording()
    compactor = Compactor(rec, CompactionConfig(boundaries=("phrase",), keep_last=0))
    session = store.create_session("app", "ana", "s")
    store.append_events(session, turns(3))
    assert compactor.plan(session) is None  # no boundary yet, no other trigger
    store.append_events(session, turns(1, 3, text=lambda k: "Let's move on to flights."))
    planned = compactor.plan_window(session)
    assert planned is not None and planned.trigger == "phrase"
    assert [e.id for e in planned.events] == ["u0", "m0", "u1", "m1", "u2", "m2"]


def test_task_done_closes_after_its_invocation_and_interval_still_bounds(store) -> None:
    rec = Recording()
    config = CompactionConfig(interval=2, overlap=0, boundaries=("task_done",))
    compactor = Compactor(rec, config)
    session = store.create_session("app", "ana", "s")
    store.append_events(
        session,
        [
            user_message("Book me a table", id="u0", invocation_id="i0"),
            tool_call("agent", "book", {"at": "8pm"}, call_id="c", id="c0", invocation_id="i0"),
            tool_result("agent", "book", {"status": "done"}, "c", id="r0", invocation_id="i0"),
            model_message("agent", "Booked for 8pm.", id="m0", invocation_id="i0"),
            *turns(2, 1),
        ],
    )
    # The segment waits until it is older than the kept invocations (three by default).
    assert compactor.plan_window(session) is None
    store.append_events(session, turns(1, 3))
    planned = compactor.plan_window(session)
    assert planned is not None and planned.trigger == "task_done"
    assert [e.id for e in planned.events] == ["u0", "c0", "r0", "m0"]
    compactor.maybe_compact(store, session)
    store.append_events(session, turns(4, 4))  # no boundary: the interval bounds windows
    planned = compactor.plan_window(session)
    assert planned is not None and planned.trigger == "interval"


class TopicEncoder:
    """Each text's vector is the axis of the topic word it mentions (an embedder stand-in)."""

    TOPICS = ("parrot", "flight", "tax")

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.full((len(texts), len(self.TOPICS)), 0.05, dtype=np.float32)
        for row, text in enumerate(texts):
            for col, topic in enumerate(self.TOPICS):
                if topic in text.lower():
                    out[row, col] = 1.0
        return out


def topical(k: int) -> str:
    return (
        "Tell me more about my parrot and its cage"
        if k < 3
        else "Which flight should I book to Porto next week"
    )


def test_a_topic_shift_is_found_with_the_injected_encoder(store) -> None:
    encoder = TopicEncoder()
    auto = AutoCompactor(Recording(), CompactionConfig(boundaries=("topic_shift",)), encode=encoder)
    session = store.create_session("app", "ana", "s")
    store.append_events(
        session,
        [
            e
            for k in range(6)
            for e in [
                user_message(topical(k), id=f"u{k}", invocation_id=f"i{k}"),
                model_message("agent", "Noted.", id=f"m{k}", invocation_id=f"i{k}"),
            ]
        ],
    )
    # A shift is called once the turns after it confirm it: not on the first new turn.
    first_five = Session("app", "ana", "x")
    for e in store.get_session(*session.key).events[:10]:
        first_five.apply(e)
    config = CompactionConfig(boundaries=("topic_shift",))
    assert Compactor(Recording(), config, encode=encoder).plan(first_five) is None
    landed = auto.compact_now(store, *session.key)
    assert len(landed) == 1 and landed[0].data["trigger"] == "topic_shift"
    assert landed[0].data["source_event_ids"] == ["u0", "m0", "u1", "m1", "u2", "m2"]
    # Turns are embedded once: a re-plan hits the cache.
    total = sum(encoder.calls)
    auto.compact_now(store, *session.key)
    assert sum(encoder.calls) == total


def test_a_topic_shift_without_an_embedder_uses_the_lexical_fallback() -> None:
    events = [
        e
        for k in range(6)
        for e in [
            user_message(topical(k) + (" cage" if k < 3 else " Porto"), invocation_id=f"i{k}"),
            model_message("agent", "Noted, " + topical(k).lower(), invocation_id=f"i{k}"),
        ]
    ]
    session = Session("app", "ana", "s")
    for e in events:
        session.apply(e)
    t = Timeline.of(session)
    found = find_boundaries(t.events, t.invocations, ("topic_shift",), threshold=0.2, encode=None)
    assert [(b.index, b.kind) for b in found] == [(6, "topic_shift")]
    same = hashed_encode(["parrots in cages", "parrots in cages"])
    assert np.array_equal(same[0], same[1]) and same[0].any()  # deterministic


CONVERSATION = [
    (
        "My parrot keeps screaming in the morning, what can I do?",
        "Parrots often call at dawn; cover the cage at night and keep a routine.",
    ),
    ("Should I get a bigger cage for him?", "A larger cage with toys reduces boredom and noise."),
    (
        "What toys do parrots like most?",
        "Foraging toys, wooden blocks to chew and bells are favourites.",
    ),
    (
        "Is it fine to give him fruit every day?",
        "Yes, small portions of apple or berries; avoid avocado.",
    ),
    (
        "Now I need to file my taxes before April, where do I start?",
        "Gather your income statements and last year's return first.",
    ),
    (
        "Can I deduct my home office costs?",
        "If you are self-employed and the room is used only for work, usually yes.",
    ),
    (
        "What about the receipts for my laptop?",
        "Keep them; equipment used for work is often deductible.",
    ),
]


def test_the_packaged_embedder_finds_the_shift_at_the_default_threshold() -> None:
    from mnemoray.embedders import open_embedder

    embedder = open_embedder("default")
    session = Session("app", "ana", "s")
    for k, (question, answer) in enumerate(CONVERSATION):
        session.apply(user_message(question, id=f"u{k}", invocation_id=f"i{k}"))
        session.apply(model_message("agent", answer, id=f"m{k}", invocation_id=f"i{k}"))
    planned = Compactor(
        Recording(), CompactionConfig(boundaries=("topic_shift",)), encode=embedder.encode
    ).plan_window(session)
    assert planned is not None and planned.trigger == "topic_shift"
    # The parrot turns (the fruit question included), not a word about taxes.
    assert [e.id for e in planned.events][-1] == "m3"


def test_the_encoder_cache_is_bounded_by_bytes_not_only_entries() -> None:
    """Long turns must not pin gigabytes: the cache also caps its texts' total bytes."""
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return hashed_encode(texts)

    cached = CachedEncoder(encode, max_items=4096, max_bytes=40_000)
    texts = [f"{k} " + "parrot " * 500 for k in range(10)]  # 3.5 KB + a 4 KB vector each
    for text in texts:
        cached([text])
    assert cached.cached_bytes <= 40_000 and 1 < cached.cached_items < 10
    calls.clear()
    cached([texts[-1]])  # recent: still cached
    assert calls == []
    cached([texts[0]])  # the oldest was evicted: encoded again
    assert calls == [[texts[0]]]
    calls.clear()
    huge = "macaw " * 8_000  # over the cap alone: answered, not cached, encoded once
    vectors = cached([huge, texts[-1]])
    assert calls == [[huge]] and vectors.shape == (2, 1024)
    assert np.allclose(vectors[0], hashed_encode([huge])[0])
    assert cached.cached_bytes <= 40_000
