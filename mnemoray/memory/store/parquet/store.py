"""MemoryStore: sharded memory segments on disk, committed by one manifest.

Writes are two-phase. ``prepare_segments`` writes Parquet + FAISS files
(invisible: no manifest lists them); ``commit`` publishes them, together with
the ledger entries of the sessions they came from, in one atomic manifest
rename. A job killed anywhere therefore either committed a session's
memories *and* its ledger entry, or neither, and a rerun redoes exactly the
uncommitted sessions. ``write_segment`` does both phases under the lock.

The parts of ``MemoryStore``: the directory, manifest and snapshots
(``store_base``), the write and the ledger (``store_commit``), prepared segments and
their rewrites (``pending_segments``), forgetting (``store_forget``), gc (``store_gc``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mnemoray.memory.store.graph.commit import import_graph_rows
from mnemoray.memory.store.graph.parts import drop_unlisted
from mnemoray.memory.store.layout import parquet_path, shard_of
from mnemoray.memory.store.manifest import write_manifest
from mnemoray.memory.store.ops.transfer import export_jsonl, read_export, read_graph_rows
from mnemoray.memory.store.parquet.commit import StoreCommits
from mnemoray.memory.store.parquet.forget import StoreForget
from mnemoray.memory.store.parquet.gc import StoreGC
from mnemoray.memory.store.quarantine import read_quarantine, write_quarantine
from mnemoray.memory.store.reload import Stamp, manifest_stamp
from mnemoray.memory.store.writes import IMPORT_BATCH, SessionKey, WriteResult


class MemoryStore(StoreCommits, StoreForget, StoreGC):
    """A memory store directory (layout in ``mnemoray.memory.store.layout``).

    ``shards`` defaults to 8 for a new store and to the manifest's count for an
    existing one; an explicit count that differs from the manifest is an error.

    ``load_shards``: load only these shards' segments into snapshots (a
    process that serves some shards of a store that outgrows one machine,
    e.g. the Ray Serve ``Index`` deployment). The other shards then look
    empty to this object's snapshots and to ``forget`` (which counts over
    loaded rows), so such a store must only be asked about tenants of its
    shards. Writes are unaffected: they scan Parquet, not snapshots.
    """

    # -- what writers ask besides the writes (mnemoray.memory.store.protocol) ----------
    backend = "parquet"

    @property
    def uri(self) -> str:
        """Where this store is, as ``open_backend`` takes it (workers reopen it by this)."""
        return str(self.root)

    def stamp(self) -> Stamp:
        """Changes whenever a commit publishes a new version (one ``stat``)."""
        return manifest_stamp(self.root)

    def written_hashes(self, result: WriteResult) -> set[str]:
        """Content hashes of the rows a write committed: the rows of its new segments
        (duplicates of stored rows were never written to them)."""
        if not result.written:
            return set()
        m = self.manifest()
        return {
            h
            for shard, entries in enumerate(m.segments)
            for e in entries
            if e.name in result.segments
            for h in pq.read_table(
                parquet_path(self.root, shard, e.name), columns=["content_hash"]
            )["content_hash"].to_pylist()
        }

    def sessions_with_rows(self, keys: set[SessionKey]) -> set[SessionKey]:
        """Of ``keys`` (app, user, session), the sessions committed segments hold rows of
        (live or not), from the touched shards' segment columns (``StoredLookup``): a
        first backfill (no session stored yet) never loads a snapshot to find nothing."""
        if not keys:
            return set()
        m = self.manifest()
        shards = sorted({shard_of(app, user, m.shards) for app, user, _ in keys})
        return self._lookup.sessions_with_rows(
            ((s, e) for s in shards for e in m.segments[s]), keys
        )

    # -- quarantine ---------------------------------------------------------
    def quarantine(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Record rejected input rows (``location``, ``reason``, ``raw``) in one new file."""
        return write_quarantine(self.root, rows)

    def read_quarantine(self) -> list[dict[str, Any]]:
        """Quarantined rows, oldest first; a row quarantined again by a rerun counts once."""
        return read_quarantine(self.root)

    def quarantine_count(self) -> int:
        return len(read_quarantine(self.root))

    # -- export / import ----------------------------------------------------
    def export_jsonl(self, path: str | Path) -> int:
        """Write every live memory with its embedding as JSON lines (``transfer``)."""
        return export_jsonl(self.load(), path)

    def _import_graph(self, rows: dict[str, list[dict[str, Any]]]) -> None:
        """Add the export's graph rows (records already stored stay) in one commit."""
        if not any(rows.values()):
            return
        with self._locked():
            m = self.manifest()
            if m.version == 0:
                self._publish_empty_manifest(True)
            parts_before = [list(parts) for parts in m.graph]
            if import_graph_rows(self.root, m, rows, self._graph_read):
                m.version += 1
                write_manifest(self.root, m)
                drop_unlisted(self.root, parts_before, m)

    def import_jsonl(self, path: str | Path, batch_size: int = IMPORT_BATCH) -> WriteResult:
        """Load an ``export_jsonl`` file; memories already stored are skipped."""
        header, batches = read_export(path, batch_size)
        # As the file says (JSON); write_segment checks them against the store.
        model: Any = header.get("embedding_model")
        dim: Any = header.get("dim")
        results = [
            self.write_segment(batch, model, dim, summarizer=header.get("summarizer"))
            for batch in batches
        ]
        self._import_graph(read_graph_rows(path))
        return WriteResult(
            version=self.manifest().version,
            written=sum(r.written for r in results),
            skipped=sum(r.skipped for r in results),
            segments=tuple(s for r in results for s in r.segments),
            ledger_added=0,
        )


__all__ = ["MemoryStore"]
