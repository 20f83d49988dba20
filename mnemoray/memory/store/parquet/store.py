"""MemoryStore: sharded memory segments on disk, committed by one manifest.

Writes are two-phase. ``prepare_segments`` writes Parquet + FAISS files
(invisible: no manifest lists them); ``commit`` publishes them, together with
the ledger entries of the sessions they came from, in one atomic manifest
rename. A job killed anywhere therefore either committed a session's
memories *and* its ledger entry, or neither, and a rerun redoes exactly the
uncommitted sessions. ``write_segment`` does both phases under the lock.

``MemoryStore`` is composed of parts, each in its own module and each given the one
:class:`~mnemoray.memory.store.parquet.state.StoreState` (the directory, lock, manifest
and snapshots): ``StoreCommits`` (the write and the ledger, ``commit``), which rewrites
prepared segments through ``PendingRewrites`` (``pending``), ``StoreForget``
(``forget``) and ``StoreGC`` (``gc``). Its methods delegate to them by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.graph.commit import GraphWrite
from mnemoray.memory.store.graph.prepared import PreparedPart
from mnemoray.memory.store.index import IndexKind
from mnemoray.memory.store.layout import faiss_path, parquet_path, shard_of
from mnemoray.memory.store.manifest import Manifest
from mnemoray.memory.store.ops.transfer import (
    check_export,
    export_jsonl,
    read_export,
    read_graph_rows,
)
from mnemoray.memory.store.parquet.commit import StoreCommits
from mnemoray.memory.store.parquet.forget import StoreForget
from mnemoray.memory.store.parquet.gc import StoreGC
from mnemoray.memory.store.parquet.lookup import StoredLookup
from mnemoray.memory.store.parquet.pending import PendingRewrites, PendingSegments
from mnemoray.memory.store.parquet.state import StoreState
from mnemoray.memory.store.quarantine import read_quarantine, write_quarantine
from mnemoray.memory.store.reload import Stamp, manifest_stamp
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.writes import IMPORT_BATCH, OwnedId, SessionKey, WriteResult


class MemoryStore:
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
    has_graph = True  # users' entity graphs commit in the same manifest as their rows

    def __init__(
        self,
        root: str | Path,
        shards: int | None = None,
        *,
        load_shards: Iterable[int] | None = None,
    ) -> None:
        self._state = StoreState(root, shards, load_shards=load_shards)
        # Fixed once the store is open (the state checked them): plain attributes.
        self.root: Path = self._state.root
        self.shards: int = self._state.shards
        self.load_shards: frozenset[int] | None = self._state.load_shards
        self._pending = PendingRewrites(self._state)
        self._commits = StoreCommits(self._state, self._pending)
        self._forgets = StoreForget(self._state)
        self._gc = StoreGC(self._state)

    @property
    def uri(self) -> str:
        """Where this store is, as ``open_backend`` takes it (workers reopen it by this)."""
        return str(self.root)

    def stamp(self) -> Stamp:
        """Changes whenever a commit publishes a new version (one ``stat``)."""
        return manifest_stamp(self.root)

    # -- manifest & snapshots (the state) -------------------------------------
    def manifest(self) -> Manifest:
        """The committed manifest (version 0 and empty before the first commit)."""
        return self._state.manifest()

    def load(self) -> StoreSnapshot:
        """A snapshot of the committed state; unchanged segments are reused across versions."""
        return self._state.load()

    def _locked(self) -> AbstractContextManager[None]:
        """The write lock (compaction takes it to publish its manifest)."""
        return self._state.locked()

    @property
    def _lookup(self) -> StoredLookup:
        return self._state.lookup

    def _stored(
        self,
        m: Manifest,
        shard: int,
        hashes: Sequence[str] | pa.ChunkedArray,
        ids: Sequence[str] | pa.ChunkedArray,
        after_version: int = 0,
    ) -> dict[OwnedId, str]:
        return self._state.stored(m, shard, hashes, ids, after_version)

    # -- writes and the ledger (StoreCommits, PendingRewrites) -----------------
    def prepare_segments(
        self,
        memories: Sequence[Memory],
        embedding_model: str,
        dim: int,
        index_kind: IndexKind = "auto",
    ) -> PendingSegments:
        """Write one segment per shard touched; nothing is visible until ``commit``."""
        return self._commits.prepare_segments(memories, embedding_model, dim, index_kind)

    def commit(
        self,
        pending: PendingSegments | None = None,
        *,
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
        prepared_graph: Sequence[PreparedPart] = (),
    ) -> WriteResult:
        """Publish prepared segments, ledger entries and graph evidence in one manifest
        rename (``StoreCommits.commit``)."""
        return self._commits.commit(
            pending,
            session_hashes=session_hashes,
            run_id=run_id,
            summarizer=summarizer,
            graph=graph,
            prepared_graph=prepared_graph,
        )

    def prepare_graph(self, graph: GraphWrite) -> tuple[PreparedPart, ...]:
        """Merge ``graph`` into its users' graphs now, unlocked: uncommitted parts for
        ``commit(..., prepared_graph=)``."""
        return self._commits.prepare_graph(graph)

    def write_segment(
        self,
        memories: Sequence[Memory],
        embedding_model: str,
        dim: int,
        *,
        index_kind: IndexKind = "auto",
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
    ) -> WriteResult:
        """Write and commit memories (skipping ones already stored) in one step."""
        return self._commits.write_segment(
            memories,
            embedding_model,
            dim,
            index_kind=index_kind,
            session_hashes=session_hashes,
            run_id=run_id,
            summarizer=summarizer,
            graph=graph,
        )

    def add(self, memories: Sequence[Memory], embedding_model: str | None = None) -> WriteResult:
        """Online add: a small flat-indexed segment that a later compaction merges."""
        return self._commits.add(memories, embedding_model)

    def drop_sessions(
        self, pending: PendingSegments | None, sessions: set[SessionKey]
    ) -> PendingSegments | None:
        """``pending`` without the rows of ``sessions`` (still uncommitted)."""
        return self._pending.drop_sessions(pending, sessions)

    def ledger_contains(self, session_hashes: Iterable[str]) -> set[str]:
        """The given session hashes that committed ledger entries already hold."""
        return self._commits.ledger_contains(session_hashes)

    def ledger_add(self, session_hashes: Iterable[str], run_id: str | None = None) -> int:
        """Record sessions as processed (e.g. ones that yielded no memories)."""
        return self._commits.ledger_add(session_hashes, run_id)

    def written_hashes(self, result: WriteResult) -> set[str]:
        """Content hashes of the rows a write committed: the rows of its new segments
        (duplicates of stored rows were never written to them)."""
        if not result.written:
            return set()
        # By the files' names, not the manifest: a merge may already have replaced them
        # there (it deletes the files only after a grace period).
        out: set[str] = set()
        for shard in range(self.shards):
            for name in result.segments:
                seg = self._state.in_memory_segment(shard, name)  # no read
                if seg is not None:
                    out.update(seg.table["content_hash"].to_pylist())
                elif (path := parquet_path(self.root, shard, name)).is_file():
                    table = pq.read_table(path, columns=["content_hash"])
                    out.update(table["content_hash"].to_pylist())
        return out

    def sessions_with_rows(self, keys: set[SessionKey]) -> set[SessionKey]:
        """Of ``keys`` (app, user, session), the sessions committed segments hold rows of
        (live or not), from the touched shards' segment columns (``StoredLookup``): a
        first backfill (no session stored yet) never loads a snapshot to find nothing."""
        if not keys:
            return set()
        m = self.manifest()
        shards = sorted({shard_of(app, user, m.shards) for app, user, _ in keys})
        return self._state.lookup.sessions_with_rows(
            ((s, e) for s in shards for e in m.segments[s]), keys
        )

    # -- forgetting and gc (StoreForget, StoreGC) -------------------------------
    def forget(
        self,
        memory_ids: Iterable[str] = (),
        session: tuple[str, str, str] | None = None,
        user: tuple[str, str] | None = None,
        *,
        owner: tuple[str, str] | None = None,
        owned: Iterable[OwnedId] = (),
        reason: str = "",
        actor: str = "",
    ) -> int:
        """Hide memories for good (survives reloads); returns how many were hidden
        (``StoreForget.forget``: ids come with their owner)."""
        return self._forgets.forget(
            memory_ids, session, user, owner=owner, owned=owned, reason=reason, actor=actor
        )

    def gc(self, grace_s: float = 0.0) -> list[Path]:
        """Delete files no committed manifest lists (``StoreGC.gc``: mind ``grace_s``
        while other writers are between prepare and commit)."""
        return self._gc.gc(grace_s)

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

    def import_jsonl(self, path: str | Path, batch_size: int = IMPORT_BATCH) -> WriteResult:
        """Load an ``export_jsonl`` file; memories already stored are skipped. The whole
        file is checked first (``check_export``), then its segments are prepared batch by
        batch and committed with its graph rows in one manifest rename: a failure leaves
        the store as it was."""
        header = check_export(path)
        _, batches = read_export(path, batch_size)
        # As the file says (checked JSON); the commit checks them against the store.
        model: Any = header.get("embedding_model")
        dim: Any = header.get("dim")
        prepared: list[PendingSegments] = []
        try:
            for batch in batches:
                prepared.append(self._commits.prepare_segments(batch, model, dim))
            pending = (
                PendingSegments(
                    prepared[0].shards,
                    model,
                    dim,
                    min(p.base_version for p in prepared),
                    tuple(e for p in prepared for e in p.entries),
                    sum(p.skipped for p in prepared),
                )
                if prepared
                else None
            )
            return self._commits.commit(
                pending,
                summarizer=header.get("summarizer") if prepared else None,
                graph_rows=read_graph_rows(path),
            )
        except BaseException:
            self._discard_unlisted(prepared)
            raise

    def _discard_unlisted(self, prepared: Sequence[PendingSegments]) -> None:
        """Remove the files of prepared segments the manifest does not list."""
        listed = {(shard, e.name) for shard, es in enumerate(self.manifest().segments) for e in es}
        for p in prepared:
            for shard, entry in p.entries:
                if (shard, entry.name) not in listed:
                    parquet_path(self.root, shard, entry.name).unlink(missing_ok=True)
                    faiss_path(self.root, shard, entry.name).unlink(missing_ok=True)


__all__ = ["MemoryStore"]
