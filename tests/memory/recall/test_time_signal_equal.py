"""The time axis as computed now (event times over the arrays first, words only for the
rest) gives the values the record-by-record loop it replaced gave, on a varied set."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

import numpy as np
import pytest

from mnemoray.memory.recall.axes import (
    FOUND,
    WHEN_BODY,
    WHEN_DATED,
    QueryTime,
    TimeFacts,
    period_positions,
    query_time,
    time_signal,
)
from mnemoray.memory.recall.candidates import Candidates
from mnemoray.memory.records.record import Memory
from tests.temporal.test_gates import corpus

DAY = 86_400.0
T0 = 1_672_531_200.0  # 2023-01-01


def reference_time_signal(
    qt: QueryTime,
    positions: Sequence[int],
    facts: Callable[[int], TimeFacts],
    t_start: np.ndarray,
    t_end: np.ndarray,
    size: int,
) -> np.ndarray:
    """The loop before the rewrite, kept as the oracle."""
    out = np.zeros(size, dtype=np.float64)
    if not qt.active:
        return out
    periods = qt.periods
    for pos in positions:
        tf = facts(int(pos))
        if periods:
            lo, hi = float(t_start[pos]), float(t_end[pos])
            if any(a <= hi and lo < b for a, b in periods) or any(
                a < sb and sa < b for a, b in periods for sa, sb in tf.spans
            ):
                out[pos] = FOUND
                continue
        if qt.intent.asks_when:
            out[pos] = WHEN_BODY if tf.spans else WHEN_DATED if tf.dated else 0.0
    return out


def records(n: int, seed: int) -> list[Memory]:
    rng = random.Random(seed)
    texts = corpus(n, seed)
    out = []
    for i in range(n):
        t = T0 + rng.uniform(-400, 400) * DAY
        text = texts[i % len(texts)] if texts[i % len(texts)].strip() else "(blank)"
        if rng.random() < 0.4:  # a chunk line carries the date it was said
            text = f"[2023-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}] Mel: {text}"
        if rng.random() < 0.2:
            text += "\nFacts: Mel moved in May 2022"
        start = None if rng.random() < 0.1 else t
        end = None if rng.random() < 0.3 else t + rng.choice((0.0, 3600.0, 40 * DAY))
        if rng.random() < 0.15:  # ends exactly where a named period starts
            end = datetime(
                rng.choice((2022, 2023)), rng.randint(1, 12), 1, tzinfo=timezone.utc
            ).timestamp()
            start = end - rng.choice((0.0, DAY))
        out.append(
            Memory(
                "app",
                "mel",
                f"s{i % 7}",
                rng.choice(("chunk", "fact")),
                text,
                event_time_start=start,
                event_time_end=end,
                created_at=t + 60,
            )
        )
    return out


QUESTIONS = (
    "what did we do last May?",
    "when did Mel adopt Max?",
    "what happened in 2023?",
    "when did we go camping last summer?",
    "what did Mel say yesterday?",
    "where did I live before Berlin?",
    "what is Mel's dog called?",
    "which day did we meet in March 2023?",
    "what did we do two weeks ago?",
    "when was the week before May 7, 2023?",
    "what do I do these days?",
    "how long ago did we move in the 2010s?",
    "when?",
    "what did we do on Monday?",
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_time_signal_equals_the_record_by_record_loop(seed: int) -> None:
    mems = records(900, seed)
    rng = random.Random(seed)
    compared = found = raised = 0
    for question in QUESTIONS:
        for ref in (T0, T0 + 130 * DAY, T0 - 300 * DAY):
            # A fresh set per question: the cache of words read must not carry answers over.
            cands = Candidates.from_memories(mems, None)
            old = Candidates.from_memories(mems, None)
            qt = query_time(question, ref)
            eligible = np.array([rng.random() < 0.9 for _ in mems])
            looked = np.zeros(len(mems), dtype=bool)
            looked[rng.sample(range(len(mems)), 150)] = True
            looked[period_positions(qt, cands.t_start, cands.t_end, eligible)] = True
            positions = np.flatnonzero(looked)
            new = time_signal(
                qt, positions, cands.time_facts, cands.t_start, cands.t_end, cands.size
            )
            want = reference_time_signal(
                qt, positions, old.time_facts, old.t_start, old.t_end, old.size
            )
            np.testing.assert_array_equal(new, want, err_msg=f"{question!r} at {ref}")
            compared += 1
            found += int((want == FOUND).sum())
            raised += int(((want > 0) & (want < FOUND)).sum())
    # The set and questions exercise each value: found by time, raised by "when".
    assert compared == len(QUESTIONS) * 3 and found > 100 and raised > 100


def count_resolves(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every record text the time axis resolves from now on, in order."""
    from mnemoray.memory.recall import candidates as cmod
    from mnemoray.memory.recall import record_times
    from mnemoray.memory.recall.axes import time_facts

    assert record_times.background_idle(timeout=60)  # no earlier test's set still resolving
    calls: list[str] = []

    def counting(text: str, reference: float) -> TimeFacts:
        calls.append(text)
        return time_facts(text, reference)

    monkeypatch.setattr(cmod, "time_facts", counting)
    monkeypatch.setattr(record_times, "time_facts", counting)
    return calls


def test_a_stored_set_resolves_its_records_once_and_keeps_them_with_the_segments(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemoray.memory.recall import record_times
    from mnemoray.memory.recall.axes import time_facts
    from mnemoray.memory.recall.retriever import Retriever
    from mnemoray.memory.store.parquet.store import MemoryStore

    mems = records(300, seed=5)
    store = MemoryStore(tmp_path / "store")
    store.add(mems[:200])
    store.add(mems[200:])  # a second segment, same user (equal records stored once)
    calls = count_resolves(monkeypatch)
    retriever = Retriever()
    cands = retriever.user_candidates(store.load(), "app", "mel")
    first = cands.size
    assert 250 < first <= 300 and len(cands.parts) == 2
    want = [time_facts(cands.key_text(p), float(cands.t_start[p])) for p in range(cands.size)]
    calls.clear()
    assert cands.time_facts(0) == want[0]  # the first ask starts the background pass
    assert cands.times_resolved(timeout=60)
    inline = len(calls)
    assert first <= inline <= first + 1  # every record once (the first maybe twice)
    assert [cands.time_facts(p) for p in range(cands.size)] == want
    assert len(calls) == inline  # later asks read no words
    # A write to the user rebuilds the set: only the new segment's records are read.
    store.add(records(20, seed=6))
    again = retriever.user_candidates(store.load(), "app", "mel")
    assert again is not cands and again.size > first
    assert [again.time_facts(p) for p in range(first)] == want
    assert again.times_resolved(timeout=60)
    assert len(calls) == inline + again.size - first  # only the new segment's records
    # The same values through the time axis as through the loop it replaced.
    for question in QUESTIONS:
        qt = query_time(question, T0)
        positions = np.arange(again.size)
        np.testing.assert_array_equal(
            time_signal(qt, positions, again.time_facts, again.t_start, again.t_end, again.size),
            reference_time_signal(
                qt, positions, again.time_facts, again.t_start, again.t_end, again.size
            ),
        )
    # Slots go with their segments.
    segments = {id(p.seg) for p in again.parts}
    assert segments <= set(record_times._BY_SEGMENT)
    del cands, again, retriever, store
    import gc

    gc.collect()
    assert not segments & set(record_times._BY_SEGMENT)


def test_a_set_larger_than_the_limit_resolves_only_what_is_asked(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemoray.memory.recall import candidates as cmod
    from mnemoray.memory.recall.axes import time_facts
    from mnemoray.memory.recall.retriever import Retriever
    from mnemoray.memory.store.parquet.store import MemoryStore

    store = MemoryStore(tmp_path / "store")
    store.add(records(120, seed=8))
    calls = count_resolves(monkeypatch)
    monkeypatch.setattr(cmod, "RESOLVE_ALL_ROWS", 50)
    cands = Retriever().user_candidates(store.load(), "app", "mel")
    assert cands.size > 50
    asked = [3, 17, 64, 3]
    got = [cands.time_facts(p) for p in asked]
    assert got == [time_facts(cands.key_text(p), float(cands.t_start[p])) for p in asked]
    assert len(calls) == 3  # each asked record once


def test_the_transient_cache_is_bounded_and_keeps_digests_not_texts(monkeypatch) -> None:
    from mnemoray.memory.recall import record_times
    from mnemoray.memory.recall.axes import time_facts as resolve
    from mnemoray.weighed_cache import WeighedCache

    monkeypatch.setattr(record_times, "_recent", WeighedCache(3))
    texts = [f"we met on March {day}, 2024. " + "filler " * 500 for day in range(1, 6)]
    for text in texts:
        assert record_times.recent_time_facts(text, 1.7e9) == resolve(text, 1.7e9)
    assert len(record_times._recent) == 3
    assert all(
        isinstance(digest, bytes) and len(digest) == 16 for digest, _ in record_times._recent
    )  # the keys: no texts kept
    assert record_times.recent_time_facts(texts[-1], 1.7e9) == resolve(texts[-1], 1.7e9)
