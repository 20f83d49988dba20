"""Query vectors for recalls: encoded in batches on one encoder thread, without timers.

A query that arrives while the encoder is idle is encoded at once: a lone client never
waits for companions. Queries that arrive while a batch encodes queue, and the encoder
takes them all (at most ``max_batch``) as its next batch the moment it is free. Under
load the batches grow by themselves, with no wait tuned to a machine; a batch costs
less per query than single encodes (benchmarks/README.md, "Serve").

Why a thread of its own that takes the next batch itself: the event loop answers HTTP
and searches while a batch encodes (ONNX Runtime releases the GIL, so the two use two
cores), and the encoder never waits for a busy loop to hand it its next batch. Both
servers embed their queries here (:mod:`mnemoray.http.parts`).

Inside a batch the encoder runs at most ``run_rows`` queries at a time (:func:`query_run_rows`),
the batch sorted by length: one run pads every query to the batch's longest (4-14 word
queries: ~1.6x the tokens), several runs of similar lengths pad less, and on a CPU
runtime a run of 5-6 short queries costs about what it costs per query in a run of 16.
A vector differs from the one-run vector only by float rounding (~3e-8), as it already
does with the batch's make-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mnemoray.embedders.base import Embedder
from mnemoray.embedders.onnx import OnnxEmbedder
from mnemoray.errors import Unavailable


def query_run_rows(embedder: Embedder, batch: int, most: int) -> int:
    """Rows per encoder run for a batch of ``batch`` queries (see top): at most ``most``,
    evened out (10 -> 5 + 5, not 6 + 4), for ONNX Runtime on CPU (where it was
    measured); any other embedder (torch, a GPU, a remote server: one call per run)
    takes the batch whole."""
    if not isinstance(embedder, OnnxEmbedder) or batch <= most:
        return batch
    return -(-batch // -(-batch // most))


class EncoderClosed(Unavailable):
    """The server is stopping: its query encoder takes no more queries."""


@dataclass(eq=False)
class _Query:
    text: str
    future: asyncio.Future[np.ndarray]
    loop: asyncio.AbstractEventLoop


class QueryEncoder:
    """``await encode(text)``: the query's vector from ``embedder``, encoded in a batch
    with the queries that arrived while the previous batch was encoding.
    ``on_batch(n)`` is called on the encoder thread before each batch of ``n``."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        max_batch: int,
        run_rows: int,
        on_batch: Callable[[int], None] = lambda n: None,
    ) -> None:
        if max_batch < 1 or run_rows < 1:
            raise ValueError(f"max_batch and run_rows must be >= 1, got {max_batch}, {run_rows}")
        self.embedder = embedder
        self._max_batch = max_batch
        self._run_rows = run_rows
        self._on_batch = on_batch
        self._cond = threading.Condition()
        self._queue: list[_Query] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mnemoray-enc", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Queries waiting for the encoder."""
        with self._cond:
            return len(self._queue)

    async def encode(self, text: str) -> np.ndarray:
        loop = asyncio.get_running_loop()
        query = _Query(text, loop.create_future(), loop)
        with self._cond:
            if self._closed:
                raise EncoderClosed("the server is stopping; it takes no more recalls")
            self._queue.append(query)
            self._cond.notify()
        return await query.future

    def close(self, timeout: float | None = None) -> None:
        """Take no more queries; the queued ones fail with :class:`EncoderClosed`. Waits up
        to ``timeout`` seconds for the batch being encoded to end."""
        with self._cond:
            self._closed = True
            left, self._queue = self._queue, []
            self._cond.notify()
        for q in left:
            _settle(q, None, EncoderClosed("the server is stopping; it takes no more recalls"))
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
            # A query whose caller went away (a cancelled request) is not encoded.
            batch = [q for q in batch if not q.future.done()]
            if batch:
                self._encode(batch)

    def _encode(self, batch: list[_Query]) -> None:
        try:
            self._on_batch(len(batch))
            rows = query_run_rows(self.embedder, len(batch), self._run_rows)
            vectors = self.embedder.encode([q.text for q in batch], rows)
        except Exception as exc:  # every caller of this batch learns it; the next batch runs
            for q in batch:
                _settle(q, None, exc)
            return
        for q, vector in zip(batch, vectors, strict=True):
            _settle(q, vector, None)


def _settle(query: _Query, vector: np.ndarray | None, error: BaseException | None) -> None:
    """Hand the result to the query's loop (futures are not thread-safe)."""

    def settle() -> None:
        if query.future.done():  # cancelled meanwhile
            return
        if error is not None:
            query.future.set_exception(error)
        else:
            query.future.set_result(vector)  # type: ignore[arg-type]

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it any more
        query.loop.call_soon_threadsafe(settle)


__all__ = ["EncoderClosed", "QueryEncoder", "query_run_rows"]
