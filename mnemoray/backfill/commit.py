"""The commit step of a backfill, the same for both engines.

A batch of distilled, embedded sessions becomes a :class:`Chunk`: its
segments written per shard (``MemoryStore.prepare_segments``: files no
manifest lists yet), the ledger keys of every session in it, and what
superseding needs. ``commit_chunk`` then forgets the stored records the
chunk's sessions replace (a session re-archived with more events keeps one
summary) and publishes the segments AND the ledger entries in one atomic
manifest rename. A job killed anywhere has committed a session's memories and
its ledger entry together or neither; a re-run redoes exactly the uncommitted
sessions, and ``gc`` removes the prepared files nobody committed.

The Ray engine prepares chunks in worker tasks and commits them on the driver,
in archive order; the in-process engine does both in one process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from mnemoray.backfill.steps import SessionItem, superseded_for
from mnemoray.memory.faults import crash_point
from mnemoray.memory.layout import parquet_path, shard_of
from mnemoray.memory.record import Memory
from mnemoray.memory.store import MemoryStore, PendingSegments, WriteResult

SessionKey = tuple[str, str, str]


@dataclass(frozen=True)
class Chunk:
    """One prepared commit unit (picklable: Ray workers hand it to the driver).

    ``stats``: rows ``read``, ``skipped``, ``quarantined`` on the way to this chunk,
    busy ``seconds`` per stage and the ``summarizer`` name.
    """

    pending: PendingSegments | None
    hashes: tuple[str, ...]  # ledger keys of every session of the chunk
    # Current sessions with new records (no embeddings): what superseding compares.
    refs: tuple[tuple[SessionKey, tuple[Memory, ...]], ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def prepared_segments(self) -> int:
        return len(self.pending.entries) if self.pending is not None else 0


def make_chunk(store: MemoryStore, items: Sequence[SessionItem], model: str | None, dim: int,
               stats: Mapping[str, Any]) -> Chunk:
    """Write the items' segments (uncommitted) and return the chunk to commit."""
    memories = [m for item in items for m in item.memories]
    pending = None
    if memories:
        if model is None:
            raise RuntimeError("make_chunk: memories arrived without an embedding model")
        pending = store.prepare_segments(memories, model, dim)
    refs = tuple((item.session.key, tuple(replace(m, embedding=None) for m in item.memories))
                 for item in items if item.current and item.memories)
    return Chunk(pending, tuple(item.raw_hash for item in items), refs, dict(stats))


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
            store.forget(owned=replaced)
    result = store.commit(chunk.pending, session_hashes=chunk.hashes, run_id=run_id,
                          summarizer=summarizer)
    crash_point("commit")
    return result


__all__ = ["Chunk", "commit_chunk", "make_chunk", "sessions_with_rows"]
