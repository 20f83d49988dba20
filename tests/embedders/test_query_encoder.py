"""The query encoder: a lone query is encoded at once, queries that arrive while a batch
encodes leave together as the next one, and each caller gets its own query's vector."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from mnemoray.embedders import Embedder, EmbedderError
from mnemoray.embedders.query_encoder import EncoderClosed, QueryEncoder


class Held(Embedder):
    """Deterministic vectors; a batch waits for ``release`` when ``hold`` is set."""

    model_id = "test-held-4"
    dim = 4

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.hold = threading.Event()
        self.release = threading.Event()
        self.started = threading.Event()

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        self.batches.append(list(texts))
        self.started.set()
        if self.hold.is_set():
            assert self.release.wait(10)
        if "boom" in texts:
            raise EmbedderError("cannot encode 'boom'", field="texts")
        return np.array([[len(t), t.count("a"), 1.0, 2.0] for t in texts], dtype=np.float32)


def _vector(text: str) -> np.ndarray:
    """What ``Held`` gives for ``text`` (Embedder.encode normalises)."""
    v = np.array([len(text), text.count("a"), 1.0, 2.0], dtype=np.float32)
    return v / np.linalg.norm(v)


async def _until(check, what: str) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{what} never happened")


def test_a_lone_query_is_encoded_at_once_alone() -> None:
    model = Held()
    encoder = QueryEncoder(model, max_batch=16, run_rows=6)
    try:
        got = asyncio.run(encoder.encode("where is the dentist"))
    finally:
        encoder.close(5)
    assert np.allclose(got, _vector("where is the dentist"))
    assert model.batches == [["where is the dentist"]]


def test_queries_that_arrive_during_a_batch_leave_together_as_the_next() -> None:
    model, sizes = Held(), []
    encoder = QueryEncoder(model, max_batch=4, run_rows=6, on_batch=sizes.append)
    texts = [f"query {'a' * i}" for i in range(7)]

    async def main() -> list[np.ndarray]:
        model.hold.set()
        first = asyncio.ensure_future(encoder.encode(texts[0]))
        await _until(model.started.is_set, "the first batch")
        rest = [asyncio.ensure_future(encoder.encode(t)) for t in texts[1:]]
        await _until(lambda: encoder.queued == 6, "six queued")
        model.hold.clear()
        model.release.set()
        return await asyncio.gather(first, *rest)

    try:
        got = asyncio.run(main())
    finally:
        encoder.close(5)
    # The first alone; the six queued meanwhile in batches of at most max_batch, in order.
    assert model.batches == [texts[:1], texts[1:5], texts[5:]]
    assert sizes == [1, 4, 2]
    for text, vector in zip(texts, got, strict=True):
        assert np.allclose(vector, _vector(text))


def test_a_failed_batch_fails_its_callers_and_the_next_batch_runs() -> None:
    model = Held()
    encoder = QueryEncoder(model, max_batch=8, run_rows=6)

    async def main() -> tuple[list[object], np.ndarray]:
        model.hold.set()
        first = asyncio.ensure_future(encoder.encode("first"))
        await _until(model.started.is_set, "the first batch")
        failing = [asyncio.ensure_future(encoder.encode(t)) for t in ("boom", "same batch")]
        await _until(lambda: encoder.queued == 2, "two queued")
        model.hold.clear()
        model.release.set()
        outcomes = await asyncio.gather(first, *failing, return_exceptions=True)
        return outcomes, await encoder.encode("after")

    try:
        (first, boom, same), after = asyncio.run(main())
    finally:
        encoder.close(5)
    assert np.allclose(first, _vector("first"))  # type: ignore[arg-type]
    assert isinstance(boom, EmbedderError) and isinstance(same, EmbedderError)
    assert np.allclose(after, _vector("after"))


def test_a_cancelled_query_is_not_encoded() -> None:
    model = Held()
    encoder = QueryEncoder(model, max_batch=8, run_rows=6)

    async def main() -> np.ndarray:
        model.hold.set()
        first = asyncio.ensure_future(encoder.encode("first"))
        await _until(model.started.is_set, "the first batch")
        gone = asyncio.ensure_future(encoder.encode("gone"))
        kept = asyncio.ensure_future(encoder.encode("kept"))
        await _until(lambda: encoder.queued == 2, "two queued")
        gone.cancel()  # its client went away
        await asyncio.sleep(0)
        model.hold.clear()
        model.release.set()
        await first
        return await kept

    try:
        kept = asyncio.run(main())
    finally:
        encoder.close(5)
    assert np.allclose(kept, _vector("kept"))
    assert model.batches == [["first"], ["kept"]]


def test_each_caller_gets_its_own_querys_vector_from_the_model() -> None:
    from mnemoray.embedders import open_embedder

    onnx = open_embedder("onnx", None, "query")
    assert onnx is not None
    encoder = QueryEncoder(onnx, max_batch=16, run_rows=6)
    texts = [f"what did I say about topic number {i}" for i in range(3)]

    async def main() -> list[np.ndarray]:
        return await asyncio.gather(*(encoder.encode(t) for t in texts))

    try:
        got = np.stack(asyncio.run(main()))
    finally:
        encoder.close(5)
    # Whatever batches formed, each vector is the query's own (float rounding aside).
    assert np.allclose(got, onnx.encode(texts), atol=1e-5)


def test_closing_fails_the_queued_and_refuses_new_queries() -> None:
    model = Held()
    encoder = QueryEncoder(model, max_batch=8, run_rows=6)

    async def main() -> tuple[object, object]:
        model.hold.set()
        first = asyncio.ensure_future(encoder.encode("first"))
        await _until(model.started.is_set, "the first batch")
        queued = asyncio.ensure_future(encoder.encode("queued"))
        await _until(lambda: encoder.queued == 1, "one queued")
        closing = asyncio.get_running_loop().run_in_executor(None, encoder.close, 5)
        await _until(lambda: encoder.queued == 0, "the queue dropped")
        model.hold.clear()
        model.release.set()
        await closing
        late = await asyncio.gather(encoder.encode("late"), return_exceptions=True)
        return (await asyncio.gather(first, queued, return_exceptions=True)), late[0]

    (first, queued), late = asyncio.run(main())
    assert np.allclose(first, _vector("first"))  # type: ignore[arg-type]
    assert isinstance(queued, EncoderClosed) and isinstance(late, EncoderClosed)
    assert EncoderClosed.status == 503


def test_batch_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        QueryEncoder(Held(), max_batch=0, run_rows=6)
