"""The write path's lookups in committed files: pyarrow reads of a few columns, kept.

A commit checks a chunk's rows against the segments committed since it was prepared
(``stored``), a backfill's driver asks which of a chunk's sessions the store already
holds rows of (``sessions_with_rows``), and every commit looks its session hashes up in
the ledger (``ledger_hashes``). These run serially in the driver, once per chunk, so a
per-call query planner and a re-read of every file each time dominated the commit step.

Committed files are immutable (each write takes a new name, see ``layout.new_name``):
the few string columns a lookup needs are read once per file and kept, up to a byte
budget (least recently used dropped first); a segment a loaded snapshot holds is used as
it is, with no read at all. Every lookup still stats each file it was asked about, so a
listed file that is gone is refused (StoreCorrupt) exactly as a fresh read would.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.store.layout import LEDGER_DIR, parquet_path, repair_hint
from mnemoray.memory.store.manifest import SegmentEntry
from mnemoray.memory.store.segment import LoadedSegment
from mnemoray.weighed_cache import WeighedCache

OwnedId = tuple[str, str, str]  # (app_name, user_id, memory_id)
SessionKey = tuple[str, str, str]  # (app_name, user_id, session_id)
SEGMENT_COLUMNS = ("app_name", "user_id", "session_id", "memory_id", "content_hash")
LEDGER_COLUMNS = ("session_hash",)
# About 0.5-1M segment rows of the lookup columns; a driver's store past that re-reads
# the least recently used files (still only these columns).
CACHE_BYTES = 128 << 20
LISTED = "{} listed in the manifest"

Loaded = Callable[[int, str], LoadedSegment | None]


class StoredLookup:
    """Lookups over one store's committed files (``root``), with their columns cached.

    ``loaded(shard, name)``: the segment a snapshot of the store holds, if any."""

    def __init__(
        self, root: Path, loaded: Loaded = lambda shard, name: None, max_bytes: int = CACHE_BYTES
    ) -> None:
        self.root = root
        self._loaded = loaded
        # Keyed by the file's stat too: a file replaced in place (a test's damage, a
        # restore) is read again rather than answered from its old columns.
        self._tables: WeighedCache[tuple[Path, int, int], pa.Table] = WeighedCache(
            max_bytes, weigh=lambda table: table.nbytes
        )

    # -- the lookups ------------------------------------------------------------
    def stored(
        self,
        shard: int,
        entries: Iterable[SegmentEntry],
        hashes: Sequence[str] | pa.ChunkedArray,
        ids: Sequence[str] | pa.ChunkedArray,
    ) -> dict[OwnedId, str]:
        """(app, user, memory_id) -> content_hash of the rows of ``entries`` (segments of
        ``shard``) matching either list; a key found twice keeps its last row, in
        manifest then row order. A memory id is unique per owner, not across the store."""
        found: dict[OwnedId, str] = {}
        if not len(hashes) and not len(ids):
            return found
        by_hash, by_id = _values(hashes), _values(ids)
        for entry in entries:
            table = self._segment(shard, entry)
            rows = table.filter(
                pc.or_(
                    pc.is_in(table["content_hash"], value_set=by_hash),
                    pc.is_in(table["memory_id"], value_set=by_id),
                )
            )
            if rows.num_rows:
                found.update(
                    ((a, u, i), h)
                    for a, u, i, h in zip(
                        *(
                            rows[c].to_pylist()
                            for c in ("app_name", "user_id", "memory_id", "content_hash")
                        ),
                        strict=True,
                    )
                )
        return found

    def sessions_with_rows(
        self, segments: Iterable[tuple[int, SegmentEntry]], keys: set[SessionKey]
    ) -> set[SessionKey]:
        """Of ``keys``, the sessions the (shard, entry) segments hold rows of."""
        found: set[SessionKey] = set()
        if not keys:
            return found
        session_ids = _values(sorted({k[2] for k in keys}))
        for shard, entry in segments:
            table = self._segment(shard, entry)
            rows = table.filter(pc.is_in(table["session_id"], value_set=session_ids))
            if rows.num_rows:
                found.update(
                    k
                    for k in zip(
                        *(rows[c].to_pylist() for c in ("app_name", "user_id", "session_id")),
                        strict=True,
                    )
                    if k in keys
                )
        return found

    def ledger_hashes(self, names: Iterable[str], hashes: Sequence[str]) -> set[str]:
        """The ``hashes`` the ledger files ``names`` hold."""
        found: set[str] = set()
        if not hashes:
            return found
        wanted = _values(hashes)
        for name in names:
            path = self.root / LEDGER_DIR / name
            column = self._read(path, LEDGER_COLUMNS, LISTED.format("a ledger file"))[
                "session_hash"
            ]
            found.update(column.filter(pc.is_in(column, value_set=wanted)).to_pylist())
        return found

    # -- where the columns come from ----------------------------------------------
    def _segment(self, shard: int, entry: SegmentEntry) -> pa.Table:
        path = parquet_path(self.root, shard, entry.name)
        seg = self._loaded(shard, entry.name)
        if seg is not None and seg.entry.version == entry.version:
            _stat_key(path, self.root, LISTED.format(f"a segment of shard {shard}"))
            return seg.table.select(list(SEGMENT_COLUMNS))  # zero-copy
        return self._read(path, SEGMENT_COLUMNS, LISTED.format(f"a segment of shard {shard}"))

    def prepared(self, shard: int, name: str) -> pa.Table:
        """The lookup columns of an uncommitted segment, kept: a commit that lists the file
        as it is then answers the next lookups over it without reading it again."""
        return self._read(
            parquet_path(self.root, shard, name),
            SEGMENT_COLUMNS,
            f"commit: prepared segment {name} (shard {shard})",
        )

    def _read(self, path: Path, columns: Sequence[str], what: str) -> pa.Table:
        """``columns`` of the committed file ``path``: from the cache, else read and kept."""
        key = _stat_key(path, self.root, what)
        table = self._tables.get(key)
        if table is not None:
            return table
        try:  # one file: ParquetFile skips read_table's dataset set-up (~40% of a read)
            with pq.ParquetFile(path) as file:
                table = file.read(columns=list(columns))
        except (OSError, pa.ArrowException) as exc:  # truncated, overwritten, wrong schema
            raise StoreCorrupt(
                f"{what}: cannot read {path} ({exc}); {repair_hint(self.root)}"
            ) from exc
        return self._tables.put(key, table)


def _values(values: Sequence[str] | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):  # a column read from a file, kept as is
        return values.combine_chunks()
    return pa.array(list(values), pa.string())


def _stat_key(path: Path, root: Path, what: str) -> tuple[Path, int, int]:
    """(path, mtime, size) of a listed file; StoreCorrupt naming it when it is gone."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise StoreCorrupt(f"{what}: {path} is missing; {repair_hint(root)}") from exc
    return path, st.st_mtime_ns, st.st_size


__all__ = ["CACHE_BYTES", "StoredLookup"]
