"""Embed memory records: an actor pool, the model loaded once per actor.

Each actor opens the embedder of the store-resolved
:class:`~mnemoray.embedders.EmbedderSpec` (``resolve_spec`` on the driver) with
``open_embedder(spec, store, "batch")``: the same model and runtime every other
caller gets for that spec (device, runtime and threads are part of the spec). It
then runs the core ``embed_sessions`` step: one ``encode`` call over every record
of the batch.
"""

from __future__ import annotations

import threading

import pyarrow as pa

from mnemoray.backfill.busy import Busy
from mnemoray.backfill.steps import embed_sessions
from mnemoray.embedders import Embedder, EmbedderError, EmbedderSpec, open_embedder
from mnemoray.memory.store.protocol import open_backend
from mnemoray.pipeline.placement import actor_tally
from mnemoray.pipeline.rows import pack, unpack


class Embed:
    """``map_batches`` callable: items in, items with embedded memories out.

    The model is loaded once per actor, in a background thread started with the
    actor, so the load overlaps the read / validate / distill of the first batches
    instead of stalling the first embed call (imports and session set-up take a
    noticeable share of a short backfill's embed stage otherwise).
    """

    def __init__(
        self,
        store_dir: str,
        shards: int,
        spec: EmbedderSpec | str | Embedder,
        encode_batch: int | None = None,
    ) -> None:
        self.store = open_backend(store_dir, shards)
        self.spec = spec
        self.encode_batch = encode_batch
        self._embedder: Embedder | None = None
        self._error: BaseException | None = None
        self._loader = threading.Thread(target=self._load, name="mnemoray-embed-load", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        try:
            # Checked against the store: a model the store does not use stops the job.
            embedder = open_embedder(self.spec, self.store, "batch")
            if embedder is None:
                raise EmbedderError(f"{self.spec} names no model for this store", field="embedder")
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
        busy = Busy()
        items, stats, _ = unpack(batch)
        placed = actor_tally("embed", len(items))
        if not any(item.memories for item in items):
            return pack(items, [*stats, {**busy.tally("embed"), **placed}])
        embedder = self.embedder
        device = getattr(embedder, "stats", None)  # the GPU embedder times its device
        device_before = device.device_s if device is not None else 0.0
        done = embed_sessions(items, embedder, batch_size=self.encode_batch)
        tally = busy.tally("embed")
        if device is not None:  # the run report's "embed_device": how busy the GPU was
            tally["seconds"]["embed_device"] = device.device_s - device_before
        return pack(done, [*stats, {**tally, **placed}], model=embedder.model_id, dim=embedder.dim)
