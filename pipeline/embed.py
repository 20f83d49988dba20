"""Embed memory records: an actor pool, the model loaded once per actor.

Each actor loads the embedder named by the store-resolved spec
(``mnemoray.memory.service.embedder_spec``) with ``load_embedder`` on CPU, or
the same sentence-transformers model on ``cuda`` when the stage is given
GPUs (``--gpus-per-embedder``), then runs the core ``embed_sessions`` step:
one ``encode`` call over every record of the batch.
"""

from __future__ import annotations

import time

import pyarrow as pa

from mnemoray.embedders import (
    DEFAULT_SPECS,
    Embedder,
    EmbedderError,
    SentenceTransformerEmbedder,
    load_embedder,
)
from mnemoray.memory.backfill import embed_sessions
from mnemoray.memory.service import check_embedder
from mnemoray.memory.store import MemoryStore
from pipeline.rows import pack, unpack


def load_for_device(spec: str | Embedder, device: str = "cpu") -> Embedder:
    """The embedder for ``spec``: ``load_embedder`` on CPU, the same model on ``device``."""
    if isinstance(spec, Embedder):
        return spec
    if device == "cpu":
        embedder = load_embedder(spec)
        if embedder is None:
            raise EmbedderError(f"embedder: {spec!r} names no model")
        return embedder
    if spec.strip().lower() in ("onnx", "onnx-int8"):
        raise EmbedderError(f"embedder: {spec!r} runs on CPU only; GPU embedding needs a "
                            f"sentence-transformers model")
    model = None if spec.strip().lower() in DEFAULT_SPECS else spec
    return SentenceTransformerEmbedder(model, device=device)


class Embed:
    """``map_batches`` callable: items in, items with embedded memories out.

    The model is loaded once per actor, on the first batch that has records to
    embed: re-running a finished job (every session skipped) loads nothing.
    """

    def __init__(self, store_dir: str, shards: int, spec: str | Embedder, device: str = "cpu",
                 encode_batch: int = 64) -> None:
        self.store = MemoryStore(store_dir, shards)
        self.spec, self.device = spec, device
        self.encode_batch = encode_batch
        self._embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            embedder = load_for_device(self.spec, self.device)
            check_embedder(self.store, embedder)  # a model the store does not use: stop
            self._embedder = embedder
        return self._embedder

    def __call__(self, batch: pa.Table) -> pa.Table:
        t0 = time.perf_counter()
        items, stats, _ = unpack(batch)
        if not any(item.memories for item in items):
            return pack(items, [*stats, {"seconds": {"embed": time.perf_counter() - t0}}])
        embedder = self.embedder
        done = embed_sessions(items, embedder, batch_size=self.encode_batch)
        return pack(done, [*stats, {"seconds": {"embed": time.perf_counter() - t0}}],
                    model=embedder.model_id, dim=embedder.dim)
