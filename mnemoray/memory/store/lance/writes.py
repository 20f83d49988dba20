"""The write path of a LanceDB store: prepare, commit, the ledger.

``prepare_segments`` checks a batch and drops the rows already stored, returning a
picklable :class:`LancePending` (the rows themselves: a Ray worker prepares, the driver
commits); ``commit`` publishes it under the store's file lock. What a commit
guarantees, in order:

1. the batch's memory rows go in with ONE LanceDB ``add``: one table version, so a
   reader sees all of the batch or none of it, never half;
2. then the sessions' ledger rows (one ``add``);
3. then the head (``lancedb.json``, an atomic rename).

A crash after 1 leaves the memories visible without their ledger entries: the rerun
distills those sessions again, finds every row already stored (same content hash),
writes none twice and ledgers them. That is weaker than the Parquet store (memories
and ledger in one manifest rename), and enough for idempotent ingestion.

A LanceDB store keeps no entity graph (``has_graph`` is False): a write that brings one
is refused (:class:`~mnemoray.errors.Unsupported`) rather than dropped unseen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from lancedb.index import BTree

from mnemoray.errors import StoreError, Unsupported
from mnemoray.faults import crash_point
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.index import INDEX_KINDS
from mnemoray.memory.store.lance import tables as t
from mnemoray.memory.store.lance.view import read_rows
from mnemoray.memory.store.rows import memories_to_table
from mnemoray.memory.store.segment import sort_key
from mnemoray.memory.store.writes import (
    OwnedId,
    SessionKey,
    WriteResult,
    check_memories,
    check_model,
    dedupe_batch,
    str_list,
)

if TYPE_CHECKING:
    from lancedb.table import Table

    from mnemoray.memory.store.graph.commit import GraphWrite
    from mnemoray.memory.store.graph.prepared import PreparedPart

IN_BATCH = 1000  # values per SQL IN list


@dataclass(frozen=True)
class LancePending:
    """Checked rows of one write, not yet in any table (picklable)."""

    embedding_model: str
    dim: int
    base_version: int  # the head version duplicates were checked against
    rows: pa.Table  # memory_schema(dim), sorted by (app, user, created_at, memory_id)
    skipped: int  # memories already stored, or repeated within the batch

    @property
    def segment_count(self) -> int:
        return 1 if self.rows.num_rows else 0


def chunks(values: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(values), IN_BATCH):
        yield values[i : i + IN_BATCH]


def ensure_owner_indexes(table: Table) -> None:
    """BTREE indexes on the owner columns, made once: every user or app scope is a where
    on them, which then reads the matching rows rather than the whole table. Rows added
    later are scanned until `mnemoray compact` folds them into the indexes."""
    have = {tuple(index.columns) for index in table.list_indices()}
    for column in ("app_name", "user_id"):
        if (column,) not in have:
            table.create_index(column, config=BTree(), replace=False)


class LanceWrites:
    """Prepare, commit and the ledger of :class:`~mnemoray.memory.store.lance.LanceStore`."""

    root: Path
    _table: Callable[[str], Table | None]
    _table_or_new: Callable[[str, pa.Schema], Table]
    _locked: Callable[[], AbstractContextManager[None]]

    # -- writing --------------------------------------------------------------------
    def _stored(self, table: Table | None, hashes: list[str], ids: list[str]) -> dict[OwnedId, str]:
        """(app, user, memory_id) -> content_hash of stored rows matching either list."""
        if table is None:
            return {}
        out: dict[OwnedId, str] = {}
        cols = ["app_name", "user_id", "memory_id", "content_hash"]
        for part in (t.sql_in("content_hash", c) for c in chunks(hashes)):
            rows = read_rows(table, part, cols).to_pylist()
            out.update(
                ((r["app_name"], r["user_id"], r["memory_id"]), r["content_hash"]) for r in rows
            )
        for part in (t.sql_in("memory_id", c) for c in chunks(ids)):
            rows = read_rows(table, part, cols).to_pylist()
            out.update(
                ((r["app_name"], r["user_id"], r["memory_id"]), r["content_hash"]) for r in rows
            )
        return out

    def _fresh(self, table: Table | None, memories: list[Memory]) -> list[Memory]:
        """``memories`` not stored yet; an id of an owner stored with other content is an
        error."""
        stored = self._stored(
            table, [m.content_hash for m in memories], [m.memory_id for m in memories]
        )
        for mem in memories:
            if (
                stored.get((mem.app_name, mem.user_id, mem.memory_id), mem.content_hash)
                != mem.content_hash
            ):
                raise StoreError(
                    f"{mem.memory_id!r} is already one of this user's "
                    f"memories, with different content",
                    field="memory_id",
                )
        hashes = set(stored.values())
        return [m for m in memories if m.content_hash not in hashes]

    def prepare_segments(
        self, memories: Sequence[Memory], embedding_model: str, dim: int, index_kind: str = "auto"
    ) -> LancePending:
        """Check the batch and drop rows already stored; nothing is written.
        ``index_kind`` is checked but LanceDB keeps no per-write index."""
        head = t.read_head(self.root)
        check_model(head.manifest(), embedding_model, dim)
        if index_kind not in INDEX_KINDS:
            raise StoreError(
                f"{index_kind!r} is not one of {', '.join(INDEX_KINDS)}", field="index_kind"
            )
        memories = list(memories)
        check_memories(memories, embedding_model, dim)
        unique, skipped = dedupe_batch(memories)
        fresh = sorted(self._fresh(self._table(t.MEMORIES), unique), key=sort_key)
        rows = memories_to_table([replace(m, shard=0) for m in fresh], dim)
        return LancePending(
            embedding_model, dim, head.version, rows, skipped + len(unique) - len(fresh)
        )

    def commit(
        self,
        pending: LancePending | None = None,
        *,
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
        prepared_graph: Sequence[PreparedPart] = (),
    ) -> WriteResult:
        """Memories (one add), then ledger rows (one add), then the head; see the module."""
        refuse_graph(graph, prepared_graph)
        hashes = list(dict.fromkeys(str_list(session_hashes, "session_hashes")))
        with self._locked():
            head = t.read_head(self.root)
            seen = self._ledger_lookup(hashes)  # one lookup, not one per hash
            hashes = [h for h in hashes if h not in seen]
            rows, skipped = None, 0
            if pending is not None:
                rows, skipped = pending.rows, pending.skipped
                if rows.num_rows:
                    check_model(head.manifest(), pending.embedding_model, pending.dim)
                if rows.num_rows and head.version != pending.base_version:
                    rows, skipped = self._drop_stored(rows, pending)
            if (
                (rows is None or not rows.num_rows)
                and not hashes
                and summarizer in (None, head.summarizer)
            ):
                return WriteResult(head.version, 0, skipped, (), 0)
            new = head.bumped()
            written = 0
            if rows is not None and rows.num_rows and pending is not None:
                if head.embedding_model is None:  # first rows: the head names their model
                    head = replace(head, embedding_model=pending.embedding_model, dim=pending.dim)
                    t.write_head(self.root, head)
                table = self._table_or_new(t.MEMORIES, t.memories_schema(pending.dim))
                table.add(
                    rows.append_column(
                        pa.field(t.COMMITTED_IN, pa.int64(), nullable=False),
                        pa.array([new.version] * rows.num_rows, pa.int64()),
                    )
                )
                written = rows.num_rows
                ensure_owner_indexes(table)
                crash_point("lance-memories")  # memories in, ledger and head not yet
                new = replace(
                    new,
                    embedding_model=head.embedding_model,
                    dim=head.dim,
                    memories_version=table.version,
                    rows=head.rows + written,
                )
            if hashes:
                self._table_or_new(t.LEDGER, t.LEDGER_SCHEMA).add(
                    pa.table(
                        {
                            "session_hash": hashes,
                            "run_id": [run_id] * len(hashes),
                            "added_at": [time.time()] * len(hashes),
                        },
                        schema=t.LEDGER_SCHEMA,
                    )
                )
            new = replace(
                new,
                ledger_sessions=head.ledger_sessions + len(hashes),
                summarizer=summarizer or head.summarizer,
            )
            t.write_head(self.root, new)
            return WriteResult(
                new.version, written, skipped, (f"v{new.version}",) if written else (), len(hashes)
            )

    def _drop_stored(self, rows: pa.Table, pending: LancePending) -> tuple[pa.Table, int]:
        """``rows`` without those another writer committed since they were prepared."""
        table = self._table(t.MEMORIES)
        hashes = rows["content_hash"].to_pylist()
        stored = self._stored(table, hashes, rows["memory_id"].to_pylist())
        owned = zip(
            rows["app_name"].to_pylist(),
            rows["user_id"].to_pylist(),
            rows["memory_id"].to_pylist(),
            hashes,
            strict=True,
        )
        for app, user, memory_id, content in owned:
            if stored.get((app, user, memory_id), content) != content:
                raise StoreError(
                    f"{memory_id!r} was committed meanwhile with different content",
                    field="memory_id",
                )
        keep = pc.invert(
            pc.is_in(
                rows["content_hash"], value_set=pa.array(list(set(stored.values())), pa.string())
            )
        )
        kept = rows.filter(keep)
        return kept, pending.skipped + rows.num_rows - kept.num_rows

    def write_segment(
        self,
        memories: Sequence[Memory],
        embedding_model: str,
        dim: int,
        *,
        index_kind: str = "auto",
        session_hashes: Iterable[str] = (),
        run_id: str | None = None,
        summarizer: str | None = None,
        graph: GraphWrite = (),
    ) -> WriteResult:
        """Prepare and commit (rows committed in between by another writer are skipped)."""
        refuse_graph(graph)  # before any row is staged
        pending = self.prepare_segments(memories, embedding_model, dim, index_kind)
        return self.commit(
            pending, session_hashes=session_hashes, run_id=run_id, summarizer=summarizer
        )

    def prepare_graph(self, graph: GraphWrite) -> tuple[PreparedPart, ...]:
        """No graph to merge into: nothing for an empty ``graph``, else Unsupported."""
        refuse_graph(graph)
        return ()

    def written_hashes(self, result: WriteResult) -> set[str]:
        table = self._table(t.MEMORIES)
        if not result.written or table is None:
            return set()
        rows = read_rows(table, f"{t.COMMITTED_IN} = {int(result.version)}", ["content_hash"])
        return set(rows["content_hash"].to_pylist())

    def sessions_with_rows(self, keys: set[SessionKey]) -> set[SessionKey]:
        table = self._table(t.MEMORIES)
        if not keys or table is None:
            return set()
        found: set[SessionKey] = set()
        for part in chunks(sorted({k[2] for k in keys})):
            rows = read_rows(
                table, t.sql_in("session_id", part), ["app_name", "user_id", "session_id"]
            )
            found.update(zip(*(rows[c].to_pylist() for c in rows.column_names), strict=True))
        return found & keys

    def drop_sessions(
        self, pending: LancePending | None, sessions: set[SessionKey]
    ) -> LancePending | None:
        if pending is None or not pending.rows.num_rows:
            return pending
        rows = pending.rows
        owners = zip(
            *(rows[c].to_pylist() for c in ("app_name", "user_id", "session_id")), strict=True
        )
        keep = pa.array([key not in sessions for key in owners], pa.bool_())
        kept = rows.filter(keep)
        return replace(pending, rows=kept, skipped=pending.skipped + rows.num_rows - kept.num_rows)

    # -- ledger ---------------------------------------------------------------------
    def _ledger_lookup(self, hashes: list[str]) -> set[str]:
        table = self._table(t.LEDGER)
        if table is None or not hashes:
            return set()
        return {
            h
            for part in chunks(hashes)
            for h in read_rows(table, t.sql_in("session_hash", part), ["session_hash"])[
                "session_hash"
            ].to_pylist()
        }

    def ledger_contains(self, session_hashes: Iterable[str]) -> set[str]:
        return self._ledger_lookup(str_list(session_hashes, "session_hashes"))

    def ledger_add(self, session_hashes: Iterable[str], run_id: str | None = None) -> int:
        return self.commit(None, session_hashes=session_hashes, run_id=run_id).ledger_added


def refuse_graph(graph: GraphWrite, prepared: Sequence[PreparedPart] = ()) -> None:
    """Unsupported when a write brings entity-graph evidence: callers ask ``has_graph``
    first, so one that did not is told, not silently given a store without its graph."""
    if graph or prepared:
        raise Unsupported(
            "the entity graph needs a Parquet store; this is a lancedb store", field="store"
        )


__all__ = ["IN_BATCH", "LancePending", "LanceWrites", "chunks", "refuse_graph"]
