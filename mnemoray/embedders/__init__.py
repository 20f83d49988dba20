"""Text embedders: one interface, local runtimes and a remote one, one way to choose.

- :mod:`~mnemoray.embedders.base`: the :class:`Embedder` interface (unit-norm float32
  rows) and its errors.
- :mod:`~mnemoray.embedders.torch`: a sentence-transformers model run by torch.
- :mod:`~mnemoray.embedders.onnx`: the same model exported to ONNX Runtime, admitted
  only after the parity gate against torch.
- :mod:`~mnemoray.embedders.cuda`: the same model fed to a GPU at its pace (parallel
  tokenising, token-budget batches, pinned copies; half precision through the gate).
- :mod:`~mnemoray.embedders.openai_compat`: a model served by an OpenAI-compatible
  ``/v1/embeddings`` server (vLLM, TEI, Ollama), parity-gated against a local model.
- :mod:`~mnemoray.embedders.spec`: :class:`EmbedderSpec`, what to open, as a string.
- :mod:`~mnemoray.embedders.resolve`: :func:`open_embedder`, the one entry point every
  caller (service, backfill, Serve) uses.
"""

from mnemoray.embedders.base import PACKAGED_MODEL_ID, Embedder, EmbedderError, ModelMismatch
from mnemoray.embedders.coalesced import CoalescedEncoder
from mnemoray.embedders.cuda import CudaEmbedder
from mnemoray.embedders.onnx import (
    MAX_BATCH_TOKENS,
    PARITY_MIN_COSINE,
    PARITY_TEXTS,
    OnnxEmbedder,
    default_onnx_cache_dir,
    token_batches,
    verify_parity,
)
from mnemoray.embedders.openai_compat import OpenAIEmbedder, RemoteEmbedderError
from mnemoray.embedders.resolve import (
    PURPOSES,
    check_model,
    open_embedder,
    resolve_spec,
    write_model,
)
from mnemoray.embedders.spec import DEFAULT_MODEL, RUNTIMES, EmbedderSpec
from mnemoray.embedders.torch import SentenceTransformerEmbedder

__all__ = [
    "CoalescedEncoder",
    "CudaEmbedder",
    "DEFAULT_MODEL",
    "Embedder",
    "EmbedderError",
    "EmbedderSpec",
    "MAX_BATCH_TOKENS",
    "ModelMismatch",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "PACKAGED_MODEL_ID",
    "PARITY_MIN_COSINE",
    "PARITY_TEXTS",
    "PURPOSES",
    "RUNTIMES",
    "RemoteEmbedderError",
    "SentenceTransformerEmbedder",
    "check_model",
    "default_onnx_cache_dir",
    "open_embedder",
    "resolve_spec",
    "token_batches",
    "verify_parity",
    "write_model",
]
