"""Periodic: the one background loop of watchers, flushers and heartbeats."""

from __future__ import annotations

import threading
import time

import pytest

from mnemoray.errors import InvalidInput
from mnemoray.periodic import Periodic


def test_ticks_until_stopped_and_survives_a_failing_tick() -> None:
    calls: list[float] = []
    errors: list[Exception] = []
    ticked = threading.Event()

    def tick() -> None:
        calls.append(time.monotonic())
        if len(calls) == 2:
            raise RuntimeError("one bad tick")
        if len(calls) >= 4:
            ticked.set()

    loop = Periodic(tick, 0.01, "test-periodic", on_error=errors.append).start()
    assert loop.start() is loop and loop.running  # a second start is a no-op
    assert ticked.wait(5)
    loop.stop()
    assert not loop.running
    seen = len(calls)
    time.sleep(0.05)
    assert len(calls) == seen >= 4  # nothing after stop
    assert [str(e) for e in errors] == ["one bad tick"]


def test_stop_wakes_a_long_interval_at_once_and_can_restart() -> None:
    loop = Periodic(lambda: None, 60.0, "test-periodic-long").start()
    started = time.monotonic()
    loop.stop()
    assert time.monotonic() - started < 1.0
    hits = threading.Event()
    loop.interval_s = 0.01
    loop.fn = hits.set
    loop.start()
    assert hits.wait(5)
    loop.stop()


def test_stop_from_its_own_tick_does_not_deadlock() -> None:
    done = threading.Event()
    holder: list[Periodic] = []

    def tick() -> None:
        holder[0].stop()
        done.set()

    holder.append(Periodic(tick, 0.01, "test-periodic-self").start())
    assert done.wait(5) and not holder[0].running


def test_interval_must_be_positive() -> None:
    with pytest.raises(InvalidInput, match="interval_s"):
        Periodic(lambda: None, 0, "bad")


def test_a_slow_tick_outliving_stop_does_not_run_beside_a_new_loop() -> None:
    release, calls = threading.Event(), []

    def tick() -> None:
        calls.append(threading.get_ident())
        release.wait(5)

    loop = Periodic(tick, 0.01, "test-periodic-slow").start()
    while not calls:
        time.sleep(0.005)
    loop.stop(timeout=0.01)  # the tick is still running: the join gives up
    old = calls[0]
    loop.start()
    release.set()
    time.sleep(0.2)
    loop.stop()
    assert calls.count(old) == 1  # the old thread ended after its tick
