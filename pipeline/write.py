"""Write: segments prepared in workers, ONE manifest commit per chunk on the driver.

``prepare_chunk`` runs as a ``map_batches`` task over ``commit_every``
sessions: the store's ``prepare_segments`` groups the chunk's memories by
shard and writes one sorted Parquet segment + one FAISS index per shard
touched. Those files are invisible (no manifest lists them). The task
returns a picklable :class:`Chunk`: the pending segments, the ledger hashes
of every session in the chunk, and what superseding needs.

``commit_chunk`` runs on the driver, in input order: it forgets records a
grown session replaces (as the in-process path does, before the commit),
then publishes the segments AND the chunk's ledger entries in one atomic
manifest rename. A job killed anywhere has committed a session's memories
and its ledger entry together or neither; a re-run redoes exactly the
uncommitted sessions, and ``gc`` removes the prepared files nobody committed.

Why not ``Dataset.groupby(shard)``: it is an all-to-all barrier, so nothing
could be committed before the whole archive was embedded, and a killed job
would lose everything. Grouping per chunk keeps the flow streaming and lets
``compact`` merge a shard's segments later.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl
import pyarrow as pa

from mnemoray.memory.backfill import superseded_for
from mnemoray.memory.faults import crash_point
from mnemoray.memory.layout import parquet_path, shard_of
from mnemoray.memory.record import Memory
from mnemoray.memory.store import MemoryStore, PendingSegments, WriteResult
from pipeline.rows import merge_stats, unpack

CHUNK = "chunk"
SessionKey = tuple[str, str, str]


@dataclass(frozen=True)
class Chunk:
    """One prepared commit unit, from a write task to the driver."""

    pending: PendingSegments | None
    hashes: tuple[str, ...]  # ledger keys of every session of the chunk
    # Current sessions with new records (no embeddings): what superseding compares.
    refs: tuple[tuple[SessionKey, tuple[Memory, ...]], ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def prepared_segments(self) -> int:
        return len(self.pending.entries) if self.pending is not None else 0


def prepare_chunk(batch: pa.Table, store_dir: str, shards: int, model: str | None,
                  dim: int) -> pa.Table:
    """``map_batches`` task: write the chunk's segments (uncommitted), return a Chunk."""
    t0 = time.perf_counter()
    items, stats, embedded = unpack(batch)
    memories = [m for item in items for m in item.memories]
    pending = None
    if memories:
        if embedded is not None:
            model, dim = embedded
        if model is None:
            raise RuntimeError("prepare_chunk: memories arrived without an embedding model")
        pending = MemoryStore(store_dir, shards).prepare_segments(memories, model, dim)
    refs = tuple((item.session.key, tuple(replace(m, embedding=None) for m in item.memories))
                 for item in items if item.current and item.memories)
    tally = merge_stats([*stats, {"seconds": {"write": time.perf_counter() - t0}}])
    chunk = Chunk(pending, tuple(item.raw_hash for item in items), refs, tally)
    return pa.table({CHUNK: [pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)]})


def sessions_with_rows(store: MemoryStore, keys: set[SessionKey]) -> set[SessionKey]:
    """Of ``keys``, the sessions the committed segments hold rows of (live or not).

    A polars scan of the touched shards' Parquet files: a first backfill (no
    session stored yet) never loads a snapshot just to find nothing to supersede.
    """
    if not keys:
        return set()
    m = store.manifest()
    shards = {shard_of(app, user, m.shards) for app, user, _ in keys}
    files = [parquet_path(store.root, s, e.name) for s in shards for e in m.segments[s]]
    if not files:
        return set()
    found = (pl.scan_parquet(files).select("app_name", "user_id", "session_id")
             .filter(pl.col("session_id").is_in([k[2] for k in keys])).unique().collect())
    return {k for k in found.rows() if k in keys}


def commit_chunk(store: MemoryStore, chunk: Chunk, *, run_id: str,
                 summarizer: str | None) -> WriteResult:
    """Supersede, then commit the chunk's segments and ledger entries in one manifest write."""
    if chunk.prepared_segments:
        crash_point("prepare")  # segment files written, nothing committed yet
    stored = sessions_with_rows(store, {key for key, _ in chunk.refs})
    if stored:
        replaced = superseded_for(store.load(), [r for r in chunk.refs if r[0] in stored])
        if replaced:  # before the commit: a run killed in between redoes these sessions
            store.forget(memory_ids=replaced)
    result = store.commit(chunk.pending, session_hashes=chunk.hashes, run_id=run_id,
                          summarizer=summarizer)
    crash_point("commit")
    return result
