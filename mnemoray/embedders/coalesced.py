"""One embedder shared by concurrent callers: calls that arrive while a model call runs
are encoded together in the next one (:mod:`mnemoray.coalesce`).

A model call on a few texts costs little more than on one (the runtime's per-call set-up
and its threads' start), and concurrent calls on a small machine fight over its cores. So
online writes, one memory each from many clients, embed together: each caller gets its
own rows, the vectors a call of its own gives up to float rounding (a runtime that pads a
batch to its longest text sums in another order). A shared call holds at most what its
callers queued, each at most ``MAX_SHARED_TEXTS`` texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnemoray.coalesce import Coalescer
from mnemoray.embedders.base import Embedder, EmbedderError

#: Model calls at once: a slow one (a long text, a stalled runtime) holds up nobody alone.
MAX_CALLS = 2
#: A call of more texts or characters runs on its own, so a bulk add never holds up the
#: small ones.
MAX_SHARED_TEXTS = 16
MAX_SHARED_CHARS = 8192


class CoalescedEncoder:
    """``embedder.encode`` for concurrent callers, coalesced."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._runs: Coalescer[list[str], np.ndarray] = Coalescer(
            self._encode_all, max_runs=MAX_CALLS
        )

    @property
    def calls(self) -> int:
        """Model calls made (for tests and metrics)."""
        return self._runs.runs

    @property
    def queued(self) -> int:
        """Calls waiting for a model call to start."""
        return self._runs.queued

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32 rows of ``texts``, as ``embedder.encode(texts)``."""
        if isinstance(texts, (str, bytes)):
            raise EmbedderError(
                "expected a sequence of strings, got a single string", field="texts"
            )
        texts = list(texts)
        chars = sum(len(t) for t in texts if isinstance(t, str))  # the model checks types
        if len(texts) > MAX_SHARED_TEXTS or chars > MAX_SHARED_CHARS:
            return self.embedder.encode(texts)
        return self._runs.submit(texts)

    def _encode_all(self, batch: Sequence[list[str]]) -> list[np.ndarray]:
        vectors = self.embedder.encode([text for texts in batch for text in texts])
        out: list[np.ndarray] = []
        at = 0
        for texts in batch:
            out.append(vectors[at : at + len(texts)])
            at += len(texts)
        return out


__all__ = ["CoalescedEncoder"]
