"""Concurrent encodes through one CoalescedEncoder share model calls; each caller gets
exactly the rows a call of its own gives."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mnemoray.embedders import CoalescedEncoder, Embedder, EmbedderError


class Held(Embedder):
    """Deterministic vectors; model calls wait until released."""

    model_id = "test-held-8"
    dim = 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        self.calls.append(list(texts))
        assert self.release.wait(10)
        if any(t == "boom" for t in texts):
            raise EmbedderError("cannot encode 'boom'", field="texts")
        return np.array(
            [[len(t) + 1.0, t.count("a") + 1.0, *range(1, 7)] for t in texts], dtype=np.float32
        )


def _calls(model: Held, n: int) -> None:
    for _ in range(1000):
        if len(model.calls) >= n:
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"{n} model calls never started")


def _queued(shared: CoalescedEncoder, n: int) -> None:
    for _ in range(1000):
        if shared.queued >= n:
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"{n} encodes never queued")


def test_encodes_queued_behind_the_calls_share_the_next_one() -> None:
    """Two model calls at once (a slow one holds up nobody alone); the rest wait for one
    of them and then share one call."""
    model = Held()
    shared = CoalescedEncoder(model)
    asks = [["first"], ["second"]] + [[f"text {i}", "a" * i] for i in range(6)]
    got: dict[int, np.ndarray] = {}
    threads = [
        threading.Thread(target=lambda i=i: got.__setitem__(i, shared.encode(asks[i])))
        for i in range(len(asks))
    ]
    for t in threads[:2]:
        t.start()
    _calls(model, 2)
    for t in threads[2:]:
        t.start()
    _queued(shared, 6)
    model.release.set()
    for t in threads:
        t.join(10)
    assert shared.calls == 3 and len(model.calls) == 3  # the two held, then one for six
    alone = Held()
    alone.release.set()
    for i, texts in enumerate(asks):
        assert np.array_equal(got[i], alone.encode(texts))
    # A bulk call runs on its own.
    bulk = [f"bulk {i}" for i in range(40)]
    assert np.array_equal(shared.encode(bulk), alone.encode(bulk)) and shared.calls == 3


def test_a_bad_request_in_a_shared_call_fails_alone() -> None:
    model = Held()
    shared = CoalescedEncoder(model)
    outcomes: dict[str, object] = {}

    def ask(name: str, texts: list[str]) -> None:
        try:
            outcomes[name] = shared.encode(texts)
        except EmbedderError as exc:
            outcomes[name] = exc

    held = [threading.Thread(target=ask, args=(name, ["x"])) for name in ("one", "two")]
    for t in held:
        t.start()
    _calls(model, 2)
    others = [
        threading.Thread(target=ask, args=("good", ["fine"])),
        threading.Thread(target=ask, args=("bad", ["boom"])),
    ]
    for t in others:
        t.start()
    _queued(shared, 2)
    model.release.set()
    for t in [*held, *others]:
        t.join(10)
    assert isinstance(outcomes["bad"], EmbedderError)
    assert isinstance(outcomes["good"], np.ndarray) and outcomes["good"].shape == (1, 8)
    with pytest.raises(EmbedderError):
        shared.encode("a bare string")
