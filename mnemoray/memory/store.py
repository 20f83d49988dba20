"""MemoryStore: sharded memory segments on disk, committed by one manifest.

Writes are two-phase. ``prepare_segments`` writes Parquet + FAISS files
(invisible: no manifest lists them); ``commit`` publishes them, together with
the ledger entries of the sessions they came from, in one atomic manifest
rename. A job killed anywhere therefore either committed a session's
memories *and* its ledger entry, or neither, and a rerun redoes exactly the
uncommitted sessions. ``write_segment`` does both phases under the lock.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.faults import crash_point
from mnemoray.memory.files import TMP_SUFFIX, atomic_write, atomic_write_bytes, file_lock
from mnemoray.memory.graph_commit import (
    GraphWrite,
    forget_in_graph,
    import_graph_rows,
    merge_extracts,
)
from mnemoray.memory.graph_parts import GRAPH_DIR, drop_unlisted, listed_files
from mnemoray.memory.graph_prepared import PreparedPart, prepare_parts, take_prepared
from mnemoray.memory.graph_prepared import discard as discard_prepared
from mnemoray.memory.graph_view import GraphCache, GraphView
from mnemoray.memory.index import INDEX_KINDS, IndexKind
from mnemoray.memory.layout import (
    INDEX_DIR,
    LEDGER_DIR,
    LOCK,
    MEMORIES_DIR,
    QUARANTINE_DIR,
    TOMBSTONES_DIR,
    faiss_path,
    new_name,
    parquet_path,
    repair_hint,
    shard_of,
)
from mnemoray.memory.manifest import (
    KEYWORD_ONLY_MODEL,
    Manifest,
    SegmentEntry,
    StoreError,
    load_manifest,
    read_manifest,
    write_manifest,
)
from mnemoray.memory.quarantine import read_quarantine, write_quarantine
from mnemoray.memory.record import Memory
from mnemoray.memory.reload import Stamp, manifest_stamp
from mnemoray.memory.segment import (
    EMBEDDING,
    LoadedSegment,
    rows_to_memories,
    sort_key,
    write_segment_files,
    write_segment_table,
)
from mnemoray.memory.snapshot import StoreSnapshot
from mnemoray.memory.stored_lookup import StoredLookup
from mnemoray.memory.tombstones import Tombstone, read_tombstones, tombstone_lines
from mnemoray.memory.transfer import export_jsonl, read_export, read_graph_rows
from mnemoray.memory.writes import (
    IMPORT_BATCH,
    OwnedId,
    SessionKey,
    WriteResult,
    check_memories,
    check_model,
    dedupe_batch,
    forget_targets,
    str_list,
)

log = logging.getLogger(__name__)

DEFAULT_SHARDS = 8
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


class MemoryStore:
    """A memory store directory (layout in ``mnemoray.memory.layout``).

    ``shards`` defaults to 8 for a new store and to the manifest's count for an
    existing one; an explicit count that differs from the manifest is an error.

    ``load_shards``: load only these shards' segments into snapshots (a
    process that serves some shards of a store that outgrows one machine,
    e.g. the Ray Serve ``Index`` deployment). The other shards then look
    empty to this object's snapshots and to ``forget`` (which counts over
    loaded rows), so such a store must only be asked about tenants of its
    shards. Writes are unaffected: they scan Parquet, not snapshots.
    """

    def __init__(self, root: str | Path, shards: int | None = None, *,
                 load_shards: Iterable[int] | None = None) -> None:
        self.root = Path(root)
        if shards is not None and (not isinstance(shards, int) or shards < 1):
            raise StoreError(f"must be a positive integer, got {shards!r}", field="shards")
        self.load_shards: frozenset[int] | None = None
        if load_shards is not None:
            picked = list(load_shards)
            if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                       for s in picked):
                raise StoreError(f"expected shard numbers >= 0, got {picked!r}",
                                 field="load_shards")
            self.load_shards = frozenset(picked)
        existing = read_manifest(self.root)
        if existing is not None and shards is not None and shards != existing.shards:
            # No path in the message: a server may answer it to a client.
            raise StoreError(f"the store has {existing.shards} shards, got {shards}",
                             field="shards")
        self.shards = existing.shards if existing else (shards or DEFAULT_SHARDS)
        self._segments: dict[tuple[int, str], LoadedSegment] = {}
        self._snap: StoreSnapshot | None = None
        self._load_lock = threading.Lock()
        self._graph_cache = GraphCache()  # graph shards, shared across snapshots
        # The write path's lookups: columns kept per committed file, or the snapshot's.
        self._lookup = StoredLookup(self.root, lambda shard, name: self._segments.get(
            (shard, name)))

    # -- manifest & snapshots ---------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with file_lock(self.root / LOCK):
            yield

    def manifest(self) -> Manifest:
        """The committed manifest (version 0 and empty before the first commit)."""
        return read_manifest(self.root) or Manifest(shards=self.shards)

    def load(self) -> StoreSnapshot:
        """A snapshot of the committed state; unchanged segments are reused across versions."""
        return self._snapshot(self.manifest())

    def _snapshot(self, m: Manifest) -> StoreSnapshot:
        with self._load_lock:
            snap = self._snap
            if snap is not None and not snap.damaged and (
                    snap.version, snap.manifest.updated_at) == (m.version, m.updated_at):
                return snap
            live: dict[tuple[int, str], LoadedSegment] = {}
            damaged: dict[int, str] = {}
            wanted = self.load_shards
            for shard, entries in enumerate(m.segments):
                if wanted is not None and shard not in wanted:
                    continue
                try:
                    loaded = [self._segments.get((shard, e.name)) or LoadedSegment.load(
                        self.root, shard, e, m.dim or 0) for e in entries]
                except StoreCorrupt as exc:
                    # One damaged shard must not take the others down: its reads refuse.
                    damaged[shard] = (f"{exc} (shard {shard} is not served until repaired); "
                                      f"{repair_hint(self.root)}")
                    log.error("memory store %s: shard %d not loaded: %s", self.root, shard, exc)
                    continue
                live.update(((shard, seg.name), seg) for seg in loaded)
            self._segments = live  # segments gone from the manifest are released
            tombstones = read_tombstones(self.root / TOMBSTONES_DIR / n for n in m.tombstones)
            segments = [[live[(s, e.name)] for e in entries]
                        if (wanted is None or s in wanted) and s not in damaged
                        else [] for s, entries in enumerate(m.segments)]
            # A private copy: callers go on to mutate their manifest for the next commit.
            mine = copy.deepcopy(m)
            graph = GraphView(self.root, mine, self._graph_cache)
            graph.preload(s for s in range(m.shards) if wanted is None or s in wanted)
            self._snap = StoreSnapshot(mine, segments, tombstones, damaged, graph=graph)
            return self._snap

    def _check_shard_files(self, m: Manifest, shard: int) -> None:
        """Refuse to write to a shard whose listed files are gone (a stat per segment):
        it cannot be served until ``doctor --repair``, and a write would hide that."""
        for e in m.segments[shard]:
            for path in (parquet_path(self.root, shard, e.name),
                         faiss_path(self.root, shard, e.name) if e.index else None):
                if path is not None and not path.is_file():
                    raise StoreCorrupt(f"shard {shard}: {path} listed in the manifest is "
                                       f"missing; {repair_hint(self.root)}")

    def _publish_empty_manifest(self, lock_held: bool) -> None:
        """Version 0 before a new store's first data file: data without a manifest then
        always means a lost one (``read_manifest`` refuses it), not a crashed first run."""
        if lock_held:
            if load_manifest(self.root) is None:
                write_manifest(self.root, Manifest(shards=self.shards))
            return
        with self._locked():
            self._publish_empty_manifest(True)

    def _graph_read(self, m: Manifest, shard: int) -> dict[str, pa.Table]:
        """A shard's graph rows at ``m``, from the tables snapshots loaded when unchanged."""
        return self._graph_cache.shard(self.root, m, shard)

    # -- writing ------------------------------------------------------------
    def _check_model(self, m: Manifest, embedding_model: str, dim: int) -> None:
        check_model(m, embedding_model, dim)

    def _check_memories(self, memories: Sequence[Memory], embedding_model: str,
                        dim: int) -> None:
        check_memories(memories, embedding_model, dim)

    def _stored(self, m: Manifest, shard: int, hashes: Sequence[str] | pa.ChunkedArray,
                ids: Sequence[str] | pa.ChunkedArray, after_version: int = 0,
                ) -> dict[OwnedId, str]:
        """(app, user, memory_id) -> content_hash of the rows of ``shard``'s segments
        committed after ``after_version`` matching either list (``StoredLookup``)."""
        return self._lookup.stored(shard, [e for e in m.segments[shard]
                                           if e.version > after_version], hashes, ids)

    def prepare_segments(self, memories: Sequence[Memory], embedding_model: str, dim: int,
                         index_kind: IndexKind = "auto") -> PendingSegments:
        """Write one segment per shard touched; nothing is visible until ``commit``."""
        m = self.manifest()
        try:
            return self._prepare(m, memories, embedding_model, dim, index_kind, lock_held=False)
        except StoreCorrupt:
            # Unlocked: a compaction may have replaced the files of ``m`` meanwhile.
            fresh = self.manifest()
            if fresh.version == m.version:
                raise
            return self._prepare(fresh, memories, embedding_model, dim, index_kind,
                                 lock_held=False)

    def _prepare(self, m: Manifest, memories: Sequence[Memory], embedding_model: str, dim: int,
                 index_kind: IndexKind, *, lock_held: bool) -> PendingSegments:
        self._check_model(m, embedding_model, dim)
        if index_kind not in INDEX_KINDS:
            raise StoreError(f"{index_kind!r} is not one of {', '.join(INDEX_KINDS)}",
                             field="index_kind")
        memories = list(memories)
        self._check_memories(memories, embedding_model, dim)
        by_shard: dict[int, list[Memory]] = defaultdict(list)
        unique, skipped = dedupe_batch(memories)
        for mem in unique:
            shard = shard_of(mem.app_name, mem.user_id, m.shards)
            by_shard[shard].append(mem.with_derived(shard=shard) if mem.shard != shard else mem)
        name = new_name("seg")
        entries = []
        for shard in sorted(by_shard):
            group = by_shard[shard]
            self._check_shard_files(m, shard)
            stored = self._stored(m, shard, [g.content_hash for g in group],
                                  [g.memory_id for g in group])
            stored_hashes = set(stored.values())
            for mem in group:
                key = (mem.app_name, mem.user_id, mem.memory_id)
                if stored.get(key, mem.content_hash) != mem.content_hash:
                    raise StoreError(f"{mem.memory_id!r} is already one of this user's "
                                     f"memories, with different content", field="memory_id")
            fresh = sorted((g for g in group if g.content_hash not in stored_hashes), key=sort_key)
            skipped += len(group) - len(fresh)
            if fresh and m.version == 0 and not entries:
                self._publish_empty_manifest(lock_held)
            if fresh:
                entries.append((shard, write_segment_files(self.root, shard, name, fresh, dim,
                                                           index_kind)))
        return PendingSegments(m.shards, embedding_model, dim, m.version, tuple(entries), skipped)

    def commit(self, pending: PendingSegments | None = None, *,
               session_hashes: Iterable[str] = (), run_id: str | None = None,
               summarizer: str | None = None, graph: GraphWrite = (),
               prepared_graph: Sequence[PreparedPart] = ()) -> WriteResult:
        """Publish prepared segments and ledger entries in one manifest rename.
        ``graph``: (session hash, graph extract) of the sessions committed; those whose
        hash is newly ledgered are merged into their users' graphs in the same rename.
        ``prepared_graph``: that merge already done (``prepare_graph``), listed as is
        where it still holds (``mnemoray.memory.graph_prepared``)."""
        with self._locked():
            return self._commit(self.manifest(), pending, session_hashes, run_id, summarizer,
                                graph, prepared_graph)

    def prepare_graph(self, graph: GraphWrite) -> tuple[PreparedPart, ...]:
        """Merge ``graph`` into its users' graphs now, unlocked (a backfill's worker):
        uncommitted parts for ``commit(..., prepared_graph=)``."""
        if not graph:
            return ()
        m = self.manifest()
        if m.version == 0:
            self._publish_empty_manifest(False)
        return prepare_parts(self.root, m, graph)

    def write_segment(self, memories: Sequence[Memory], embedding_model: str, dim: int, *,
                      index_kind: IndexKind = "auto", session_hashes: Iterable[str] = (),
                      run_id: str | None = None, summarizer: str | None = None,
                      graph: GraphWrite = ()) -> WriteResult:
        """Write and commit memories (skipping ones already stored) in one step."""
        with self._locked():
            m = self.manifest()
            pending = self._prepare(m, memories, embedding_model, dim, index_kind,
                                    lock_held=True)
            return self._commit(m, pending, session_hashes, run_id, summarizer, graph)

    def add(self, memories: Sequence[Memory], embedding_model: str | None = None) -> WriteResult:
        """Online add: a small flat-indexed segment that a later compaction merges."""
        memories = list(memories)
        m = self.manifest()
        model = embedding_model or m.embedding_model
        first = next((mem.embedding for mem in memories
                      if isinstance(mem, Memory) and mem.embedding is not None), None)
        if model is None:
            if first is not None:
                raise StoreError("the store has none yet; pass the model id",
                                 field="embedding_model")
            model = KEYWORD_ONLY_MODEL
        if model == m.embedding_model:
            dim = m.dim or 0
        else:
            dim = 0 if model == KEYWORD_ONLY_MODEL or first is None else int(np.size(first))
        return self.write_segment(memories, model, dim, index_kind="flat")

    def _drop_stored(self, m: Manifest, pending: PendingSegments,
                     ) -> tuple[list[tuple[int, SegmentEntry]], int]:
        """Rewrite pending segments without rows another writer committed meanwhile."""
        entries, skipped = [], 0
        for shard, entry in pending.entries:
            path = parquet_path(self.root, shard, entry.name)
            if not path.is_file() or (entry.index and not faiss_path(
                    self.root, shard, entry.name).is_file()):
                raise StoreError(f"commit: prepared segment {entry.name} (shard {shard}) is "
                                 f"missing; was it removed by gc()? Prepare it again")
            if not any(e.version > pending.base_version for e in m.segments[shard]):
                entries.append((shard, entry))
                continue
            keys = self._lookup.prepared(shard, entry.name)
            stored = self._stored(m, shard, keys["content_hash"], keys["memory_id"],
                                  pending.base_version)
            if not stored:
                entries.append((shard, entry))
                continue
            table = pq.read_table(path)  # the rows are rewritten: all columns
            owned = zip(table["app_name"].to_pylist(), table["user_id"].to_pylist(),
                        table["memory_id"].to_pylist(), strict=True)
            for key, content in zip(owned, table["content_hash"].to_pylist(), strict=True):
                memory_id = key[2]
                if stored.get(key, content) != content:
                    raise StoreError(f"{memory_id!r} was committed meanwhile with "
                                     f"different content", field="memory_id")
            dup = pc.is_in(table["content_hash"], value_set=pa.array(list(stored.values()),
                                                                     pa.string()))
            rows = np.flatnonzero(~dup.to_numpy(zero_copy_only=False))
            skipped += entry.rows - len(rows)
            vectors = (table[EMBEDDING].combine_chunks().flatten().to_numpy()
                       .reshape(-1, pending.dim) if pending.dim else None)
            fresh = rows_to_memories(table.drop_columns([EMBEDDING]) if pending.dim else table,
                                     rows, vectors)
            path.unlink()
            faiss_path(self.root, shard, entry.name).unlink(missing_ok=True)
            if fresh:
                entries.append((shard, write_segment_files(self.root, shard, new_name("seg"),
                                                           fresh, pending.dim, entry.index)))
        return entries, skipped

    def _new_ledger_hashes(self, m: Manifest, hashes: list[str]) -> list[str]:
        unique = list(dict.fromkeys(hashes))
        known = self._ledger_lookup(m, unique)
        return [h for h in unique if h not in known]

    def _commit(self, m: Manifest, pending: PendingSegments | None,
                session_hashes: Iterable[str], run_id: str | None,
                summarizer: str | None, graph: GraphWrite = (),
                prepared_graph: Sequence[PreparedPart] = ()) -> WriteResult:
        hashes = self._new_ledger_hashes(m, str_list(session_hashes, "session_hashes"))
        new = set(hashes)  # a session ledgered before (a rerun) changes no graph
        graph = [(h, ex) for h, ex in graph if h in new]
        entries: list[tuple[int, SegmentEntry]] = []
        skipped = 0
        if pending is not None:
            if pending.shards != m.shards:
                raise StoreError(f"commit: segments were prepared for {pending.shards} shards, "
                                 f"the store has {m.shards}")
            if pending.entries:
                self._check_model(m, pending.embedding_model, pending.dim)
            entries, skipped = self._drop_stored(m, pending)
            skipped += pending.skipped
        if not entries and not hashes and (summarizer is None or summarizer == m.summarizer):
            discard_prepared(self.root, prepared_graph)
            return WriteResult(m.version, 0, skipped, (), 0)
        parts_before = [list(parts) for parts in m.graph]
        if graph:
            if m.version == 0:
                self._publish_empty_manifest(True)
            # Parts listed at m.version + 1, in this manifest: a backfill chunk's were
            # merged where it was prepared (the shards they do not cover: here).
            if prepared_graph:
                take_prepared(self.root, m, prepared_graph, graph, self._graph_read)
            else:
                merge_extracts(self.root, m, graph, self._graph_read)
            crash_point("graph-commit")  # graph parts written, the manifest not yet
        else:
            discard_prepared(self.root, prepared_graph)
        m.version += 1
        for shard, entry in entries:
            m.segments[shard].append(replace(entry, version=m.version))
        if entries and pending is not None and m.embedding_model is None:
            m.embedding_model, m.dim = pending.embedding_model, pending.dim
        if hashes:
            name = f"{new_name('ledger')}.parquet"
            frame = pl.DataFrame({"session_hash": hashes, "run_id": [run_id] * len(hashes),
                                  "added_at": [time.time()] * len(hashes)},
                                 schema={"session_hash": pl.String, "run_id": pl.String,
                                         "added_at": pl.Float64})
            atomic_write(self.root / LEDGER_DIR / name, frame.write_parquet)
            m.ledger.append(name)
            m.ledger_sessions += len(hashes)
        if summarizer is not None:
            m.summarizer = summarizer
        write_manifest(self.root, m)
        drop_unlisted(self.root, parts_before, m)
        return WriteResult(m.version, sum(e.rows for _, e in entries), skipped,
                           tuple(dict.fromkeys(e.name for _, e in entries)), len(hashes))

    # -- ledger -------------------------------------------------------------
    def _ledger_lookup(self, m: Manifest, hashes: list[str]) -> set[str]:
        return self._lookup.ledger_hashes(m.ledger, hashes)

    def ledger_contains(self, session_hashes: Iterable[str]) -> set[str]:
        """The given session hashes that committed ledger entries already hold."""
        return self._ledger_lookup(self.manifest(), str_list(session_hashes, "session_hashes"))

    def ledger_add(self, session_hashes: Iterable[str], run_id: str | None = None) -> int:
        """Record sessions as processed (e.g. ones that yielded no memories)."""
        return self.commit(None, session_hashes=session_hashes, run_id=run_id).ledger_added

    # -- what writers ask besides the writes (mnemoray.memory.backend) ----------
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
        return {h for shard, entries in enumerate(m.segments) for e in entries
                if e.name in result.segments
                for h in pq.read_table(parquet_path(self.root, shard, e.name),
                                       columns=["content_hash"])["content_hash"].to_pylist()}

    def sessions_with_rows(self, keys: set[SessionKey]) -> set[SessionKey]:
        """Of ``keys`` (app, user, session), the sessions committed segments hold rows of
        (live or not), from the touched shards' segment columns (``StoredLookup``): a
        first backfill (no session stored yet) never loads a snapshot to find nothing."""
        if not keys:
            return set()
        m = self.manifest()
        shards = sorted({shard_of(app, user, m.shards) for app, user, _ in keys})
        return self._lookup.sessions_with_rows(
            ((s, e) for s in shards for e in m.segments[s]), keys)

    def drop_sessions(self, pending: PendingSegments | None,
                      sessions: set[SessionKey]) -> PendingSegments | None:
        """``pending`` without the rows of ``sessions``: each prepared segment holding some
        is rewritten without them (uncommitted, like the original, which is removed)."""
        if pending is None:
            return None
        entries, dropped, name = [], 0, new_name("seg")
        for shard, entry in pending.entries:
            path = parquet_path(self.root, shard, entry.name)
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
                    self.root, shard, name, table.filter(pa.array(~drop)), pending.dim,
                    "auto")))
            path.unlink()
            faiss_path(self.root, shard, entry.name).unlink(missing_ok=True)
        return replace(pending, entries=tuple(entries), skipped=pending.skipped + dropped)

    # -- forgetting ---------------------------------------------------------
    def forget(self, memory_ids: Iterable[str] = (), session: tuple[str, str, str] | None = None,
               user: tuple[str, str] | None = None, *,
               owner: tuple[str, str] | None = None,
               owned: Iterable[OwnedId] = (), reason: str = "", actor: str = "") -> int:
        """Hide memories for good (survives reloads); returns how many were hidden.

        A memory id is unique per (app, user) only, so ids come with their owner:
        ``memory_ids`` of ``owner``, or ``owned`` (app, user, memory_id) triples.
        Each tombstone names its owner and never hides another user's memory that
        carries the same id. ``reason`` / ``actor``: kept on each tombstone.
        """
        why = {"reason": reason, "actor": actor}
        targets = forget_targets(memory_ids, session, user, owner, owned, reason, actor)
        with self._locked():
            m = self.manifest()
            snap = self._snapshot(m)
            version, now = m.version + 1, time.time()
            new: list[Tombstone] = []
            for app_name, user_id, memory_id in targets:
                mem = snap.get(memory_id, (app_name, user_id))
                if mem is not None:
                    new.append(Tombstone("memory", version, now, memory_id=memory_id,
                                         app_name=mem.app_name, user_id=mem.user_id,
                                         session_id=mem.session_id, **why))
            if session is not None:
                new.append(Tombstone("session", version, now, app_name=session[0],
                                     user_id=session[1], session_id=session[2], **why))
            if user is not None:
                new.append(Tombstone("user", version, now, app_name=user[0], user_id=user[1],
                                     **why))
            # Count over the owners touched only: a damaged shard elsewhere must not block it.
            after = StoreSnapshot(m, snap.segments, snap.tombstones + new)
            owners = {(t.app_name, t.user_id) for t in new}
            hidden = sum(snap.count(a, u, now=now) - after.count(a, u, now=now)
                         for a, u in owners)
            # The graph forgets in the same manifest: what the session alone supports,
            # the user's graph, the relations of forgotten memories.
            parts_before = [list(parts) for parts in m.graph]
            graph_changed = forget_in_graph(self.root, m, targets, session, user,
                                            self._graph_read)
            if hidden == 0 and not graph_changed:
                return 0
            if hidden:
                name = f"{new_name('tomb')}.jsonl"
                atomic_write_bytes(self.root / TOMBSTONES_DIR / name, tombstone_lines(new))
                m.tombstones.append(name)
                m.tombstone_count += len(new)
            m.version = version
            write_manifest(self.root, m)
            drop_unlisted(self.root, parts_before, m)
            return hidden

    # -- quarantine ---------------------------------------------------------
    def quarantine(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Record rejected input rows (``location``, ``reason``, ``raw``) in one new file."""
        return write_quarantine(self.root, rows)

    def read_quarantine(self) -> list[dict[str, Any]]:
        """Quarantined rows, oldest first; a row quarantined again by a rerun counts once."""
        return read_quarantine(self.root)

    def quarantine_count(self) -> int:
        return len(read_quarantine(self.root))

    # -- maintenance --------------------------------------------------------
    def gc(self, grace_s: float = 0.0) -> list[Path]:
        """Delete files no committed manifest lists (a crashed writer's leftovers).

        Prepared-but-uncommitted segments are such files too: while other
        writers may be between prepare and commit, pass a grace period longer
        than that gap (their commit fails cleanly if its files were removed).
        """
        with self._locked():
            m = self.manifest()
            keep = {self.root / LEDGER_DIR / n for n in m.ledger}
            keep |= {self.root / TOMBSTONES_DIR / n for n in m.tombstones}
            keep |= listed_files(self.root, m)
            for shard, entries in enumerate(m.segments):
                for e in entries:
                    keep |= {parquet_path(self.root, shard, e.name),
                             faiss_path(self.root, shard, e.name)}
            now, removed = time.time(), []
            candidates = [p for sub in (MEMORIES_DIR, INDEX_DIR, LEDGER_DIR, TOMBSTONES_DIR,
                                        GRAPH_DIR)
                          for p in (self.root / sub).rglob("*")]
            candidates += list((self.root / QUARANTINE_DIR).glob(f"*{TMP_SUFFIX}"))
            candidates += list(self.root.glob(f".*{TMP_SUFFIX}"))
            for path in candidates:
                if path.is_file() and path not in keep and now - path.stat().st_mtime >= grace_s:
                    path.unlink()
                    removed.append(path)
            return sorted(removed)

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
        model, dim = header.get("embedding_model"), header.get("dim")
        results = [self.write_segment(batch, model, dim, summarizer=header.get("summarizer"))
                   for batch in batches]
        self._import_graph(read_graph_rows(path))
        return WriteResult(
            version=self.manifest().version,
            written=sum(r.written for r in results), skipped=sum(r.skipped for r in results),
            segments=tuple(s for r in results for s in r.segments), ledger_added=0)
