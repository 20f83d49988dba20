"""The commit step of a backfill, the same for both engines.

A batch of distilled, embedded sessions becomes a :class:`Chunk`: its
segments written per shard (``MemoryStore.prepare_segments``: files no
manifest lists yet), the ledger keys of every session in it, and what
superseding needs. ``commit_chunk`` then drops the rows of sessions the
store already holds a NEWER copy of (decided by the session version the records
carry, never by the order copies are read or committed: an older copy in a later
batch, file or run is ledgered and replaces nothing), forgets the stored records
the other sessions replace (a session re-archived with more events keeps one
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

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.backfill.steps import SessionItem, older_copies, superseded_for
from mnemoray.memory.faults import crash_point
from mnemoray.memory.layout import faiss_path, new_name, parquet_path, shard_of
from mnemoray.memory.record import Memory
from mnemoray.memory.segment import scan_columns, write_segment_table
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
    found = (scan_columns(files, ("app_name", "user_id", "session_id"))
             .filter(pl.col("session_id").is_in([k[2] for k in keys])).unique().collect())
    return {k for k in found.rows() if k in keys}


def commit_chunk(store: MemoryStore, chunk: Chunk, *, run_id: str,
                 summarizer: str | None) -> WriteResult:
    """Supersede, then commit the chunk's segments and ledger entries in one manifest write."""
    if chunk.prepared_segments:
        crash_point("prepare")  # segment files written, nothing committed yet
    pending = chunk.pending
    stored = sessions_with_rows(store, {key for key, _ in chunk.refs})
    if stored:
        snap = store.load()
        refs = [r for r in chunk.refs if r[0] in stored]
        older = older_copies(snap, refs)
        if older:  # ledgered below, but their rows are not published
            pending = drop_sessions(store, pending, older)
        replaced = superseded_for(snap, [r for r in refs if r[0] not in older])
        if replaced:  # before the commit: a run killed in between redoes these sessions
            store.forget(owned=replaced)
    result = store.commit(pending, session_hashes=chunk.hashes, run_id=run_id,
                          summarizer=summarizer)
    crash_point("commit")
    return result


def drop_sessions(store: MemoryStore, pending: PendingSegments | None,
                  sessions: set[SessionKey]) -> PendingSegments | None:
    """``pending`` without the rows of ``sessions``: each prepared segment holding some
    is rewritten without them (uncommitted, like the original, which is removed)."""
    if pending is None:
        return None
    entries, dropped, name = [], 0, new_name("seg")
    for shard, entry in pending.entries:
        path = parquet_path(store.root, shard, entry.name)
        table = pq.read_table(path)
        owners = zip(*(table[c].to_pylist() for c in ("app_name", "user_id", "session_id")),
                     strict=True)
        drop = np.fromiter((key in sessions for key in owners), bool, table.num_rows)
        if not drop.any():
            entries.append((shard, entry))
            continue
        dropped += int(drop.sum())
        if not drop.all():
            entries.append((shard, write_segment_table(
                store.root, shard, name, table.filter(pa.array(~drop)), pending.dim,
                "auto")))
        path.unlink()
        faiss_path(store.root, shard, entry.name).unlink(missing_ok=True)
    return replace(pending, entries=tuple(entries), skipped=pending.skipped + dropped)


__all__ = ["Chunk", "commit_chunk", "drop_sessions", "make_chunk", "sessions_with_rows"]
