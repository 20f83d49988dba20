"""Write: a chunk's segments prepared in a worker task, committed on the driver.

``prepare_chunk`` runs as a ``map_batches`` task over ``commit_every``
sessions and calls the core ``make_chunk`` (``mnemoray.backfill.commit``) on the
store reopened by its location (``open_backend``): on a Parquet store one sorted
segment + one FAISS index per shard touched, and the chunk's sessions merged into
their users' entity graphs (one graph part per shard: the driver's commit lists it
rather than merging, ``mnemoray.memory.store.graph.prepared``); on a LanceDB store the
checked rows themselves; invisible until committed. It returns the picklable
``Chunk``; the driver commits chunks in input order with the core ``commit_chunk``,
the same commit step the in-process engine uses.

Why not ``Dataset.groupby(shard)``: it is an all-to-all barrier, so nothing
could be committed before the whole archive was embedded, and a killed job
would lose everything. Grouping per chunk keeps the flow streaming and lets
``compact`` merge a shard's segments later.
"""

from __future__ import annotations

import pickle

import pyarrow as pa

from mnemoray.backfill.busy import Busy, add_busy
from mnemoray.backfill.commit import make_chunk
from mnemoray.memory.store.protocol import open_backend
from mnemoray.pipeline.rows import merge_stats, unpack

CHUNK = "chunk"


def prepare_chunk(
    batch: pa.Table, store_dir: str, shards: int, model: str | None, dim: int
) -> pa.Table:
    """``map_batches`` task: write the chunk's segments (uncommitted), return a Chunk."""
    busy = Busy()
    items, stats, embedded = unpack(batch)
    if embedded is not None:
        model, dim = embedded
    chunk = make_chunk(open_backend(store_dir, shards), items, model, dim, merge_stats(stats))
    add_busy(chunk.stats, "write", *busy.elapsed())
    return pa.table({CHUNK: [pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)]})
