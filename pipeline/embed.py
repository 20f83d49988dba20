"""Embed memory records: an actor pool, the model loaded once per actor.

Each actor loads the embedder named by the store-resolved spec
(``mnemoray.memory.service.embedder_spec``): on CPU by default through
``fast_embedder`` (for the packaged MiniLM its parity-gated ONNX build, the one the
Serve replica embeds queries with: the embed stage is >80% of a backfill's wall
time and ONNX encodes ~1.9x faster), with ``--embed-runtime torch`` through
``load_embedder``, or the sentence-transformers model on ``cuda`` when the stage is
given GPUs (``--gpus-per-embedder``). It then runs the core ``embed_sessions``
step: one ``encode`` call over every record of the batch.
"""

from __future__ import annotations

import threading
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
from mnemoray.memory.service import check_embedder, fast_embedder
from mnemoray.memory.store import MemoryStore
from pipeline.rows import pack, unpack


def load_for_device(store: MemoryStore, spec: str | Embedder, device: str = "cpu", *,
                    runtime: str = "auto", threads: int | None = None) -> Embedder:
    """The embedder for ``spec``.

    CPU, ``runtime="auto"``: ``fast_embedder`` (the parity-gated ONNX build of the
    packaged MiniLM, else ``spec`` itself); ``runtime="torch"``: ``load_embedder``.
    Other devices: the same sentence-transformers model on ``device``.
    """
    if isinstance(spec, Embedder):
        return spec
    if device == "cpu":
        if runtime == "auto":
            embedder = fast_embedder(store, spec, threads=threads)
        else:
            embedder = load_embedder(spec)
            if threads is not None and isinstance(embedder, SentenceTransformerEmbedder):
                import torch

                torch.set_num_threads(threads)  # process-wide: this actor only embeds
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

    The model is loaded once per actor, in a background thread started with the
    actor, so the load overlaps the read / validate / distill of the first batches
    instead of stalling the first embed call (CPU load ~1-2 s of imports and session
    set-up per actor, measured as part of the embed stage before).
    """

    def __init__(self, store_dir: str, shards: int, spec: str | Embedder, device: str = "cpu",
                 encode_batch: int = 64, runtime: str = "auto",
                 threads: int | None = None) -> None:
        self.store = MemoryStore(store_dir, shards)
        self.spec, self.device = spec, device
        self.encode_batch = encode_batch
        self.runtime, self.threads = runtime, threads
        self._embedder: Embedder | None = None
        self._error: BaseException | None = None
        self._loader = threading.Thread(target=self._load, name="mnemoray-embed-load",
                                        daemon=True)
        self._loader.start()

    def _load(self) -> None:
        try:
            embedder = load_for_device(self.store, self.spec, self.device,
                                       runtime=self.runtime, threads=self.threads)
            check_embedder(self.store, embedder)  # a model the store does not use: stop
            self._embedder = embedder
        except BaseException as exc:  # noqa: BLE001 - raised on the first batch that embeds
            self._error = exc

    @property
    def embedder(self) -> Embedder:
        self._loader.join()
        if self._error is not None:
            raise self._error
        assert self._embedder is not None
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
