"""Small real embedders for tests that need to see when (and how often) embedding runs."""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from mnemoray.embedders import Embedder
from mnemoray.text import words


class GatedEmbedder(Embedder):
    """Bag of hashed words (deterministic, instant), except that a call holding a text
    that contains ``gate_word`` sets ``entered`` and blocks until ``release`` is set:
    a test can act while that write is still embedding. ``calls``: the texts of each
    encode call, in order."""

    model_id = "test-gated-32"
    dim = 32

    def __init__(self, gate_word: str = "GATED") -> None:
        self.gate_word = gate_word
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[list[str]] = []

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        self.calls.append(list(texts))
        if any(self.gate_word in t for t in texts):
            self.entered.set()
            if not self.release.wait(30):
                raise RuntimeError("the test never released the gated embedder")
        out = np.full((len(texts), self.dim), 1e-3, dtype=np.float32)
        for i, text in enumerate(texts):
            for w in words(text):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out


__all__ = ["GatedEmbedder"]
