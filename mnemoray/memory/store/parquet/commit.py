"""The Parquet store's two-phase write, a part of
:class:`~mnemoray.memory.store.parquet.store.MemoryStore` (``StoreCommits``):
``prepare_segments`` writes one segment per shard touched (invisible), ``commit`` publishes
them with the ledger entries of their sessions and the sessions' graph extracts in one
manifest rename (:mod:`mnemoray.memory.store.parquet.store`); and the ledger of processed
sessions."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from mnemoray.embedders.base import KEYWORD_ONLY_MODEL
from mnemoray.errors import StoreCorrupt, StoreError
from mnemoray.faults import crash_point
from mnemoray.files import atomic_write
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.graph.commit import GraphWrite, import_graph_rows, merge_extracts
from mnemoray.memory.store.graph.parts import drop_unlisted
from mnemoray.memory.store.graph.prepared import PreparedPart, prepare_parts, take_prepared
from mnemoray.memory.store.graph.prepared import discard as discard_prepared
from mnemoray.memory.store.index import INDEX_KINDS, IndexKind
from mnemoray.memory.store.layout import LEDGER_DIR, new_name, shard_of
from mnemoray.memory.store.manifest import Manifest, SegmentEntry, write_manifest
from mnemoray.memory.store.parquet.pending import PendingRewrites, PendingSegments
from mnemoray.memory.store.parquet.state import StoreState
from mnemoray.memory.store.rows import memories_to_table
from mnemoray.memory.store.segment import (
    LoadedSegment,
    sort_key,
    write_segment_files,
    written_segment,
)
from mnemoray.memory.store.writes import (
    WriteResult,
    check_memories,
    check_model,
    dedupe_batch,
    str_list,
)


class StoreCommits:
    """Prepare, commit, write and add memories; the session ledger (a part of
    ``MemoryStore``). A commit rewrites prepared segments through ``pending``."""

    def __init__(self, state: StoreState, pending: PendingRewrites) -> None:
        self._state = state
        self._pending = pending

    # -- writing ------------------------------------------------------------
    def _check_model(self, m: Manifest, embedding_model: str, dim: int) -> None:
        check_model(m, embedding_model, dim)

    def _check_memories(self, memories: Sequence[Memory], embedding_model: str, dim: int) -> None:
        check_memories(memories, embedding_model, dim)

    def prepare_segments(
        self,
        memories: Sequence[Memory],
        embedding_model: str,
        dim: int,
        index_kind: IndexKind = "auto",
    ) -> PendingSegments:
        """Write one segment per shard touched; nothing is visible until ``commit``."""
        m = self._state.manifest()
        try:
            return self._prepare(m, memories, embedding_model, dim, index_kind, lock_held=False)
        except StoreCorrupt:
            # Unlocked: a compaction may have replaced the files of ``m`` meanwhile.
            fresh = self._state.manifest()
            if fresh.version == m.version:
                raise
            return self._prepare(fresh, memories, embedding_model, dim, index_kind, lock_held=False)

    def _prepare(
        self,
        m: Manifest,
        memories: Sequence[Memory],
        embedding_model: str,
        dim: int,
        index_kind: IndexKind,
        *,
        lock_held: bool,
        keep: list[LoadedSegment] | None = None,
    ) -> PendingSegments:
        """``keep``: given, it gets each segment written as a load of its files would."""
        self._check_model(m, embedding_model, dim)
        if index_kind not in INDEX_KINDS:
            raise StoreError(
                f"{index_kind!r} is not one of {', '.join(INDEX_KINDS)}", field="index_kind"
            )
        memories = list(memories)
        self._check_memories(memories, embedding_model, dim)
        by_shard: dict[int, list[Memory]] = defaultdict(list)
        unique, skipped = dedupe_batch(memories)
        for mem in unique:
            shard = shard_of(mem.app_name, mem.user_id, m.shards)
            by_shard[shard].append(mem.with_derived(shard=shard) if mem.shard != shard else mem)
        # Every check before any file is written: a refused batch leaves nothing behind.
        todo: list[tuple[int, list[Memory]]] = []
        for shard in sorted(by_shard):
            group = by_shard[shard]
            self._state.check_shard_files(m, shard)
            stored = self._state.stored(
                m, shard, [g.content_hash for g in group], [g.memory_id for g in group]
            )
            stored_hashes = set(stored.values())
            for mem in group:
                key = (mem.app_name, mem.user_id, mem.memory_id)
                if stored.get(key, mem.content_hash) != mem.content_hash:
                    raise StoreError(
                        f"{mem.memory_id!r} is already one of this user's "
                        f"memories, with different content",
                        field="memory_id",
                    )
            fresh = sorted((g for g in group if g.content_hash not in stored_hashes), key=sort_key)
            skipped += len(group) - len(fresh)
            if fresh:
                todo.append((shard, fresh))
        if todo and m.version == 0:
            self._state.publish_empty_manifest(lock_held)
        name = new_name("seg")

        def write(item: tuple[int, list[Memory]]) -> tuple[int, SegmentEntry]:
            shard, fresh = item
            if keep is None:
                return shard, write_segment_files(
                    self._state.root, shard, name, fresh, dim, index_kind
                )
            seg = written_segment(
                self._state.root, shard, name, memories_to_table(fresh, dim), dim, index_kind
            )
            keep.append(seg)
            return shard, seg.entry

        entries = [write(item) for item in todo]
        return PendingSegments(m.shards, embedding_model, dim, m.version, tuple(entries), skipped)

    def commit(
        self,
        pending: PendingSegments | None = None,
        *,
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
        prepared_graph: Sequence[PreparedPart] = (),
        graph_rows: Mapping[str, list[dict[str, Any]]] | None = None,
    ) -> WriteResult:
        """Publish prepared segments and ledger entries in one manifest rename.
        ``graph``: (session hash, graph extract) of the sessions committed; those whose
        hash is newly ledgered are merged into their users' graphs in the same rename.
        ``prepared_graph``: that merge already done (``prepare_graph``), listed as is
        where it still holds (``mnemoray.memory.store.graph.prepared``).
        ``graph_rows``: an export's graph rows (table -> rows) added in the same rename."""
        with self._state.locked():
            return self._commit(
                self._state.manifest(),
                pending,
                session_hashes,
                run_id,
                summarizer,
                graph,
                prepared_graph,
                graph_rows,
            )

    def prepare_graph(self, graph: GraphWrite) -> tuple[PreparedPart, ...]:
        """Merge ``graph`` into its users' graphs now, unlocked (a backfill's worker):
        uncommitted parts for ``commit(..., prepared_graph=)``."""
        if not graph:
            return ()
        m = self._state.manifest()
        if m.version == 0:
            self._state.publish_empty_manifest(False)
        return prepare_parts(self._state.root, m, graph)

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
        """Write and commit memories (skipping ones already stored) in one step; the
        next snapshot takes the segments written as they are (no read back)."""
        written: list[LoadedSegment] = []
        with self._state.locked():
            m = self._state.manifest()
            pending = self._prepare(
                m, memories, embedding_model, dim, index_kind, lock_held=True, keep=written
            )
            result = self._commit(m, pending, session_hashes, run_id, summarizer, graph)
        committed = set(result.segments)
        self._state.remember_written((s for s in written if s.name in committed), result.version)
        return result

    def add(self, memories: Sequence[Memory], embedding_model: str | None = None) -> WriteResult:
        """Online add: a small flat-indexed segment that a later compaction merges."""
        memories = list(memories)
        m = self._state.manifest()
        model = embedding_model or m.embedding_model
        first = next(
            (
                mem.embedding
                for mem in memories
                if isinstance(mem, Memory) and mem.embedding is not None
            ),
            None,
        )
        if model is None:
            if first is not None:
                raise StoreError(
                    "the store has none yet; pass the model id", field="embedding_model"
                )
            model = KEYWORD_ONLY_MODEL
        if model == m.embedding_model:
            dim = m.dim or 0
        else:
            dim = 0 if model == KEYWORD_ONLY_MODEL or first is None else int(np.size(first))
        return self.write_segment(memories, model, dim, index_kind="flat")

    def _new_ledger_hashes(self, m: Manifest, hashes: list[str]) -> list[str]:
        unique = list(dict.fromkeys(hashes))
        known = self._ledger_lookup(m, unique)
        return [h for h in unique if h not in known]

    def _commit(
        self,
        m: Manifest,
        pending: PendingSegments | None,
        session_hashes: Iterable[str],
        run_id: str | None,
        summarizer: str | None,
        graph: GraphWrite = (),
        prepared_graph: Sequence[PreparedPart] = (),
        graph_rows: Mapping[str, list[dict[str, Any]]] | None = None,
    ) -> WriteResult:
        hashes = self._new_ledger_hashes(m, str_list(session_hashes, "session_hashes"))
        new = set(hashes)  # a session ledgered before (a rerun) changes no graph
        graph = [(h, ex) for h, ex in graph if h in new]
        entries: list[tuple[int, SegmentEntry]] = []
        skipped = 0
        if pending is not None:
            if pending.shards != m.shards:
                raise StoreError(
                    f"commit: segments were prepared for {pending.shards} shards, "
                    f"the store has {m.shards}"
                )
            if pending.entries:
                self._check_model(m, pending.embedding_model, pending.dim)
            entries, skipped = self._pending.drop_stored(m, pending)
            skipped += pending.skipped
        parts_before = [list(parts) for parts in m.graph]
        rows_added = False
        if graph_rows and any(graph_rows.values()):
            if m.version == 0:
                self._state.publish_empty_manifest(True)
            # Parts listed at m.version + 1, in this manifest (none written if all are known).
            rows_added = import_graph_rows(
                self._state.root, m, dict(graph_rows), self._state.graph_read
            )
        if (
            not entries
            and not hashes
            and not rows_added
            and (summarizer is None or summarizer == m.summarizer)
        ):
            discard_prepared(self._state.root, prepared_graph)
            return WriteResult(m.version, 0, skipped, (), 0)
        if graph:
            if m.version == 0:
                self._state.publish_empty_manifest(True)
            # Parts listed at m.version + 1, in this manifest: a backfill chunk's were
            # merged where it was prepared (the shards they do not cover: here).
            if prepared_graph:
                take_prepared(self._state.root, m, prepared_graph, graph, self._state.graph_read)
            else:
                merge_extracts(self._state.root, m, graph, self._state.graph_read)
            crash_point("graph-commit")  # graph parts written, the manifest not yet
        else:
            discard_prepared(self._state.root, prepared_graph)
        m.version += 1
        for shard, entry in entries:
            m.segments[shard].append(replace(entry, version=m.version))
        if entries and pending is not None and m.embedding_model is None:
            m.embedding_model, m.dim = pending.embedding_model, pending.dim
        if hashes:
            name = f"{new_name('ledger')}.parquet"
            frame = pl.DataFrame(
                {
                    "session_hash": hashes,
                    "run_id": [run_id] * len(hashes),
                    "added_at": [time.time()] * len(hashes),
                },
                schema={"session_hash": pl.String, "run_id": pl.String, "added_at": pl.Float64},
            )
            atomic_write(self._state.root / LEDGER_DIR / name, frame.write_parquet)
            m.ledger.append(name)
            m.ledger_sessions += len(hashes)
        if summarizer is not None:
            m.summarizer = summarizer
        write_manifest(self._state.root, m)
        drop_unlisted(self._state.root, parts_before, m)
        return WriteResult(
            m.version,
            sum(e.rows for _, e in entries),
            skipped,
            tuple(dict.fromkeys(e.name for _, e in entries)),
            len(hashes),
        )

    # -- ledger -------------------------------------------------------------
    def _ledger_lookup(self, m: Manifest, hashes: list[str]) -> set[str]:
        return self._state.lookup.ledger_hashes(m.ledger, hashes)

    def ledger_contains(self, session_hashes: Iterable[str]) -> set[str]:
        """The given session hashes that committed ledger entries already hold."""
        return self._ledger_lookup(
            self._state.manifest(), str_list(session_hashes, "session_hashes")
        )

    def ledger_add(self, session_hashes: Iterable[str], run_id: str | None = None) -> int:
        """Record sessions as processed (e.g. ones that yielded no memories)."""
        return self.commit(None, session_hashes=session_hashes, run_id=run_id).ledger_added
