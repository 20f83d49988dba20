"""LanceStore: the memory store on LanceDB tables (embedded, no server).

Tables and head: :mod:`mnemoray.memory.store.lance.tables`; the write path and what a commit
guarantees: :mod:`mnemoray.memory.store.lance.writes`; reads:
:mod:`mnemoray.memory.store.lance.view`.
A forget is one ``delete`` (the rows leave every read at once), then its records in
``forgets``; expired rows are filtered on read and deleted by the forget that covers them.
As on the Parquet store, the forgotten words stay on disk until :meth:`LanceStore.compact`
rewrites the data files without them and :meth:`LanceStore.gc` removes the table
versions that still hold them (LanceDB keeps every version for readers that pinned it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lancedb
import pyarrow as pa

from mnemoray.files import file_lock
from mnemoray.memory.store.lance import tables as t
from mnemoray.memory.store.lance.view import LanceView, read_rows
from mnemoray.memory.store.lance.writes import LancePending, LanceWrites
from mnemoray.memory.store.layout import LOCK
from mnemoray.memory.store.manifest import Manifest
from mnemoray.memory.store.ops.transfer import check_export, export_jsonl, read_export
from mnemoray.memory.store.quarantine import write_quarantine
from mnemoray.memory.store.reload import Stamp
from mnemoray.memory.store.tombstones import Tombstone
from mnemoray.memory.store.writes import IMPORT_BATCH, OwnedId, WriteResult, forget_targets

if TYPE_CHECKING:
    from lancedb.table import Table


class LanceStore(LanceWrites):
    """A memory store in one directory of LanceDB tables (``lancedb://DIR``)."""

    backend = "lancedb"
    has_graph = False  # the entity graph is kept by the Parquet store only
    shards = 1  # one table; LanceDB partitions its own files
    load_shards: frozenset[int] | None = None

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._db: Any = None
        self._view: LanceView | None = None
        self._view_lock = threading.Lock()

    @property
    def uri(self) -> str:
        return f"lancedb://{self.root}"

    # -- tables, head, lock ---------------------------------------------------------
    def _connect(self) -> Any:
        if self._db is None:
            self.root.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.root))
        return self._db

    def _table(self, name: str) -> Table | None:
        """The table's latest version; None before its first write."""
        if not (self.root / f"{name}.lance").is_dir():
            return None
        return self._connect().open_table(name)

    def _table_or_new(self, name: str, schema: pa.Schema) -> Table:
        found = self._table(name)
        return found if found is not None else self._connect().create_table(name, schema=schema)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with file_lock(self.root / LOCK):
            yield

    def manifest(self) -> Manifest:
        return t.read_head(self.root).manifest()

    def stamp(self) -> Stamp:
        """The head and each table's version list: a commit cut short before its head
        was rewritten still changes what readers see."""
        out: list[int] = []
        for path in (
            self.root / t.HEAD,
            self.root / f"{t.MEMORIES}.lance" / "_versions",
            self.root / f"{t.FORGETS}.lance" / "_versions",
        ):
            try:
                st = os.stat(path)
                out += [st.st_ino, st.st_mtime_ns, st.st_size]
            except FileNotFoundError:
                out += [0, 0, 0]
        return tuple(out)

    def load(self) -> LanceView:
        """A view of the latest committed table versions (reused while nothing changed)."""
        with self._view_lock:
            memories, forgets = self._table(t.MEMORIES), self._table(t.FORGETS)
            key = (
                memories.version if memories is not None else 0,
                forgets.version if forgets is not None else 0,
            )
            head = t.read_head(self.root)
            view = self._view
            if view is not None and (view.head, view.key) == (head, key):
                return view
            for table in (memories, forgets):
                if table is not None:
                    table.checkout(table.version)  # pinned: the view never changes
            self._view = LanceView(head, memories, forgets, key)
            return self._view

    # -- forgetting -----------------------------------------------------------------
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
        """Delete memories for good (one LanceDB delete); returns how many live (unexpired)
        ones went. Ids are unique per owner: ``memory_ids`` of ``owner``, or ``owned``
        triples. Each forget is recorded with ``reason`` and ``actor`` in ``forgets``."""
        targets = forget_targets(memory_ids, session, user, owner, owned, reason, actor)
        why = {"reason": reason, "actor": actor}
        with self._locked():
            table = self._table(t.MEMORIES)
            if table is None:
                return 0
            head, now = t.read_head(self.root), time.time()
            version = head.version + 1
            by_id = [
                t.both(t.owner_where(a, u), f"memory_id = {t.sql_str(i)}") for a, u, i in targets
            ]
            scoped = (
                [t.both(t.owner_where(*session[:2]), f"session_id = {t.sql_str(session[2])}")]
                if session
                else []
            )
            scoped += [t.owner_where(*user)] if user else []
            where = " OR ".join(f"({c})" for c in by_id + scoped)
            new: list[Tombstone] = []
            if by_id:
                found = read_rows(
                    table,
                    t.both(" OR ".join(f"({c})" for c in by_id), t.live_where(now)),
                    ["app_name", "user_id", "session_id", "memory_id"],
                )
                new += [Tombstone("memory", version, now, **r, **why) for r in found.to_pylist()]
            if session:
                new.append(
                    Tombstone(
                        "session",
                        version,
                        now,
                        app_name=session[0],
                        user_id=session[1],
                        session_id=session[2],
                        **why,
                    )
                )
            if user:
                new.append(
                    Tombstone("user", version, now, app_name=user[0], user_id=user[1], **why)
                )
            matched = int(table.count_rows(where))
            if not matched:
                return 0
            hidden = int(table.count_rows(t.both(where, t.live_where(now))))
            table.delete(where)  # expired rows of the same owners go too: nothing stays
            forgets = self._table_or_new(t.FORGETS, t.FORGETS_SCHEMA)
            if new:
                forgets.add(
                    pa.Table.from_pylist([x.to_dict() for x in new], schema=t.FORGETS_SCHEMA)
                )
            t.write_head(
                self.root,
                head.bumped(
                    memories_version=table.version,
                    forgets_version=forgets.version,
                    forget_count=head.forget_count + len(new),
                    rows=max(0, head.rows - matched),
                ),
            )
            return hidden

    # -- compaction, gc --------------------------------------------------------------------
    def compact(self) -> dict[str, int]:
        """Rewrite each table's data files without deleted rows (a new version; older ones
        stay for pinned readers until :meth:`gc`). Returns each table's new version."""
        out: dict[str, int] = {}
        with self._locked():
            for name in (t.MEMORIES, t.LEDGER, t.FORGETS):
                table = self._table(name)
                if table is not None:
                    # Prune nothing here: gc decides, with its grace for pinned readers.
                    table.optimize(cleanup_older_than=timedelta(days=36500))
                    out[name] = int(table.version)
        return out

    def gc(self, grace_s: float = 3600.0) -> dict[str, int]:
        """Remove the table versions (and the files only they use) older than ``grace_s``
        seconds; the latest version always stays. After :meth:`compact`, this is what
        erases forgotten words from disk. Returns the versions and bytes removed."""
        removed = {"versions": 0, "bytes": 0}
        with self._locked():
            for name in (t.MEMORIES, t.LEDGER, t.FORGETS):
                table = self._table(name)
                if table is not None:
                    stats = table.to_lance().cleanup_old_versions(
                        older_than=timedelta(seconds=grace_s)
                    )
                    removed["versions"] += int(stats.old_versions)
                    removed["bytes"] += int(stats.bytes_removed)
        return removed

    # -- quarantine, export / import -----------------------------------------------------
    def quarantine(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Record rejected input rows: the same files as the Parquet store's, in ``DIR``."""
        self.root.mkdir(parents=True, exist_ok=True)
        return write_quarantine(self.root, rows)

    def export_jsonl(self, path: str | Path) -> int:
        return export_jsonl(self.load(), path)

    def import_jsonl(self, path: str | Path, batch_size: int = IMPORT_BATCH) -> WriteResult:
        """Load an ``export_jsonl`` file; memories already stored are skipped. The whole
        file is checked first (``check_export``, as the Parquet store does), then its
        batches are checked against the store and committed in one add: a failure leaves
        the store as it was. Graph lines are checked, not stored (no graph here)."""
        header = check_export(path)
        _, batches = read_export(path, batch_size)
        # As the file says (checked JSON); prepare_segments checks them against the store.
        model: Any = header.get("embedding_model")
        dim: Any = header.get("dim")
        prepared = [self.prepare_segments(batch, model, dim) for batch in batches]
        if not prepared:
            return WriteResult(self.manifest().version, 0, 0, (), 0)
        pending = LancePending(
            model,
            dim,
            min(p.base_version for p in prepared),
            pa.concat_tables([p.rows for p in prepared]),
            sum(p.skipped for p in prepared),
        )
        return self.commit(pending, summarizer=header.get("summarizer"))


__all__ = ["LanceStore"]
