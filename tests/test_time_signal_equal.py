"""The time axis as computed now (event times over the arrays first, words only for the
rest) gives the values the record-by-record loop it replaced gave, on a varied set."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

import numpy as np
import pytest
from test_temporal_gates import corpus

from mnemoray.memory.axes import (
    FOUND,
    WHEN_BODY,
    WHEN_DATED,
    QueryTime,
    TimeFacts,
    period_positions,
    query_time,
    time_signal,
)
from mnemoray.memory.candidates import Candidates
from mnemoray.memory.record import Memory

DAY = 86_400.0
T0 = 1_672_531_200.0  # 2023-01-01


def reference_time_signal(qt: QueryTime, positions: Sequence[int],
                          facts: Callable[[int], TimeFacts], t_start: np.ndarray,
                          t_end: np.ndarray, size: int) -> np.ndarray:
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
                    a < sb and sa < b for a, b in periods for sa, sb in tf.spans):
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
            end = datetime(rng.choice((2022, 2023)), rng.randint(1, 12), 1,
                           tzinfo=timezone.utc).timestamp()
            start = end - rng.choice((0.0, DAY))
        out.append(Memory("app", "mel", f"s{i % 7}", rng.choice(("chunk", "fact")), text,
                          event_time_start=start, event_time_end=end, created_at=t + 60))
    return out


QUESTIONS = ("what did we do last May?", "when did Mel adopt Max?", "what happened in 2023?",
             "when did we go camping last summer?", "what did Mel say yesterday?",
             "where did I live before Berlin?", "what is Mel's dog called?",
             "which day did we meet in March 2023?", "what did we do two weeks ago?",
             "when was the week before May 7, 2023?", "what do I do these days?",
             "how long ago did we move in the 2010s?", "when?", "what did we do on Monday?")


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
            new = time_signal(qt, positions, cands.time_facts, cands.t_start, cands.t_end,
                              cands.size)
            want = reference_time_signal(qt, positions, old.time_facts, old.t_start,
                                         old.t_end, old.size)
            np.testing.assert_array_equal(new, want, err_msg=f"{question!r} at {ref}")
            compared += 1
            found += int((want == FOUND).sum())
            raised += int(((want > 0) & (want < FOUND)).sum())
    # The set and questions exercise each value: found by time, raised by "when".
    assert compared == len(QUESTIONS) * 3 and found > 100 and raised > 100
