"""Prepared, uncommitted segments of the Parquet store (``PendingSegments``) and their
rewrites without some rows: the rows another writer committed meanwhile (at commit) and
those of sessions a backfill drops. A rewrite writes new uncommitted files and removes
the old ones: nothing is visible until a commit lists it. A part of
:class:`~mnemoray.memory.store.parquet.store.MemoryStore` (``PendingRewrites``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray.errors import StoreError
from mnemoray.memory.store.layout import faiss_path, new_name, parquet_path
from mnemoray.memory.store.manifest import Manifest, SegmentEntry
from mnemoray.memory.store.parquet.state import StoreState
from mnemoray.memory.store.rows import EMBEDDING, rows_to_memories
from mnemoray.memory.store.segment import write_segment_files, write_segment_table
from mnemoray.memory.store.writes import SessionKey


@dataclass(frozen=True)
class PendingSegments:
    """Segment files written but not yet committed (picklable: a Ray worker can
    prepare, the driver commits)."""

    shards: int
    embedding_model: str
    dim: int
    base_version: int  # the manifest version duplicates were checked against
    entries: tuple[tuple[int, SegmentEntry], ...]  # (shard, entry)
    skipped: int  # memories already stored, or repeated within the batch

    @property
    def segment_count(self) -> int:
        """Segment files prepared (one per shard touched)."""
        return len(self.entries)


class PendingRewrites:
    """Rewrites of prepared segments (a part of ``MemoryStore``)."""

    def __init__(self, state: StoreState) -> None:
        self._state = state

    def drop_stored(
        self,
        m: Manifest,
        pending: PendingSegments,
    ) -> tuple[list[tuple[int, SegmentEntry]], int]:
        """Rewrite pending segments without rows another writer committed meanwhile."""
        entries, skipped = [], 0
        for shard, entry in pending.entries:
            path = parquet_path(self._state.root, shard, entry.name)
            if not all(p.is_file() for p in entry.files(self._state.root, shard)):
                raise StoreError(
                    f"commit: prepared segment {entry.name} (shard {shard}) is "
                    f"missing; was it removed by gc()? Prepare it again"
                )
            if not any(e.version > pending.base_version for e in m.segments[shard]):
                entries.append((shard, entry))
                continue
            keys = self._state.lookup.prepared(shard, entry.name)
            stored = self._state.stored(
                m, shard, keys["content_hash"], keys["memory_id"], pending.base_version
            )
            if not stored:
                entries.append((shard, entry))
                continue
            table = pq.read_table(path)  # the rows are rewritten: all columns
            owned = zip(
                table["app_name"].to_pylist(),
                table["user_id"].to_pylist(),
                table["memory_id"].to_pylist(),
                strict=True,
            )
            for key, content in zip(owned, table["content_hash"].to_pylist(), strict=True):
                memory_id = key[2]
                if stored.get(key, content) != content:
                    raise StoreError(
                        f"{memory_id!r} was committed meanwhile with different content",
                        field="memory_id",
                    )
            dup = pc.is_in(
                table["content_hash"], value_set=pa.array(list(stored.values()), pa.string())
            )
            rows = np.flatnonzero(~dup.to_numpy(zero_copy_only=False))
            skipped += entry.rows - len(rows)
            vectors = (
                table[EMBEDDING].combine_chunks().flatten().to_numpy().reshape(-1, pending.dim)
                if pending.dim
                else None
            )
            fresh = rows_to_memories(
                table.drop_columns([EMBEDDING]) if pending.dim else table, rows, vectors
            )
            path.unlink()
            faiss_path(self._state.root, shard, entry.name).unlink(missing_ok=True)
            if fresh:
                entries.append(
                    (
                        shard,
                        # entry.index: a kind; None only in a keyword-only store (no index).
                        write_segment_files(
                            self._state.root,
                            shard,
                            new_name("seg"),
                            fresh,
                            pending.dim,
                            entry.index,  # type: ignore[arg-type]
                        ),
                    )
                )
        return entries, skipped

    def drop_sessions(
        self, pending: PendingSegments | None, sessions: set[SessionKey]
    ) -> PendingSegments | None:
        """``pending`` without the rows of ``sessions``: each prepared segment holding some
        is rewritten without them (uncommitted, like the original, which is removed)."""
        if pending is None:
            return None
        entries, dropped, name = [], 0, new_name("seg")
        for shard, entry in pending.entries:
            path = parquet_path(self._state.root, shard, entry.name)
            table = pq.read_table(path)
            owners = zip(
                *(table[c].to_pylist() for c in ("app_name", "user_id", "session_id")), strict=True
            )
            drop = np.fromiter((key in sessions for key in owners), bool, table.num_rows)
            if not drop.any():
                entries.append((shard, entry))
                continue
            dropped += int(drop.sum())
            if not drop.all():
                entries.append(
                    (
                        shard,
                        write_segment_table(
                            self._state.root,
                            shard,
                            name,
                            table.filter(pa.array(~drop)),
                            pending.dim,
                            "auto",
                        ),
                    )
                )
            path.unlink()
            faiss_path(self._state.root, shard, entry.name).unlink(missing_ok=True)
        return replace(pending, entries=tuple(entries), skipped=pending.skipped + dropped)
