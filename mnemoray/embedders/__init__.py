"""Text embedders: one interface, two runtimes, one way to choose.

- :mod:`~mnemoray.embedders.base`: the :class:`Embedder` interface (unit-norm float32
  rows) and its errors.
- :mod:`~mnemoray.embedders.torch`: a sentence-transformers model run by torch.
- :mod:`~mnemoray.embedders.onnx`: the same model exported to ONNX Runtime, admitted
  only after the parity gate against torch.
- :mod:`~mnemoray.embedders.resolve`: :class:`EmbedderSpec` and :func:`open_embedder`,
  the one entry point every caller (service, backfill, Serve) uses.
"""

from mnemoray.embedders.base import (
    PACKAGED_MODEL_ID,
    Embedder,
    EmbedderError,
    ModelMismatch,
)
from mnemoray.embedders.onnx import (
    MAX_BATCH_TOKENS,
    PARITY_MIN_COSINE,
    PARITY_TEXTS,
    OnnxEmbedder,
    default_onnx_cache_dir,
    token_batches,
    verify_parity,
)
from mnemoray.embedders.resolve import (
    DEFAULT_MODEL,
    PURPOSES,
    RUNTIMES,
    EmbedderSpec,
    check_model,
    open_embedder,
    resolve_spec,
    write_model,
)
from mnemoray.embedders.torch import SentenceTransformerEmbedder

__all__ = ["DEFAULT_MODEL", "MAX_BATCH_TOKENS", "PACKAGED_MODEL_ID", "PARITY_MIN_COSINE",
           "PARITY_TEXTS", "PURPOSES", "RUNTIMES", "Embedder", "EmbedderError", "EmbedderSpec",
           "ModelMismatch", "OnnxEmbedder", "SentenceTransformerEmbedder", "check_model",
           "default_onnx_cache_dir", "open_embedder", "resolve_spec", "token_batches",
           "verify_parity", "write_model"]
