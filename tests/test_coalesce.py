"""The coalescer under many concurrent callers: each gets exactly its own result."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from mnemoray.coalesce import Coalescer


@pytest.mark.parametrize("max_runs", [1, 2, 3])
def test_every_caller_gets_its_own_result(max_runs: int) -> None:
    running = 0
    most = 0
    lock = threading.Lock()

    def square_all(batch: Sequence[int]) -> list[int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        # Runs of unequal length: one ends while another is going on with callers in it.
        time.sleep(0.0005 * len(batch))
        with lock:
            running -= 1
        return [n * n for n in batch]

    runs: Coalescer[int, int] = Coalescer(square_all, max_runs=max_runs)
    wrong: list[tuple[int, object]] = []

    def caller(k: int) -> None:
        for i in range(60):
            n = k * 1000 + i
            got = runs.submit(n)
            if got != n * n:
                wrong.append((n, got))

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a caller never returned"
    assert wrong == []
    assert most <= max_runs and runs.runs < 8 * 60 and runs.batched > 0
    with pytest.raises(ValueError):
        Coalescer(square_all, max_runs=0)


def test_a_step_that_answers_the_wrong_count_fails_every_caller_once() -> None:
    """Its effects may stand (a commit): no caller gets a result, and a shared run is not
    repeated request by request."""
    calls: list[Sequence[int]] = []
    release = threading.Event()

    def wrong(batch: Sequence[int]) -> list[int]:
        calls.append(list(batch))
        assert release.wait(10)
        return []

    runs: Coalescer[int, int] = Coalescer(wrong)
    errors: list[BaseException] = []

    def ask(n: int) -> None:
        try:
            runs.submit(n)
        except RuntimeError as exc:
            errors.append(exc)

    first = threading.Thread(target=ask, args=(1,))
    first.start()
    while not calls:
        time.sleep(0.001)
    others = [threading.Thread(target=ask, args=(n,)) for n in (2, 3)]
    for t in others:
        t.start()
    while runs.queued < 2:
        time.sleep(0.001)
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert len(errors) == 3 and sorted(map(len, calls)) == [1, 2]  # no third, fourth run
