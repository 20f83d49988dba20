"""One immutable segment: memory rows in Parquet plus their FAISS index.

Rows are sorted by (app_name, user_id, created_at, memory_id), so each
tenant (and each app) is one contiguous row range; row i of the Parquet file
is id i of the FAISS index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.files import atomic_write
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.index import (
    IndexKind,
    build_index,
    flat_vectors,
    read_index,
    write_index,
)
from mnemoray.memory.store.layout import faiss_path, parquet_path
from mnemoray.memory.store.manifest import SegmentEntry

# The table's columns and the conversions of rows to records and back are memory_rows';
# they are still imported from here.
from mnemoray.memory.store.rows import (
    EMBEDDING,
    OPTIONAL_FIELDS,
    memories_to_table,
    memory_schema,
    with_optional_columns,
)

# Small row groups let polars skip groups by their (sorted) app/user statistics.
ROW_GROUP_SIZE = 65_536
# A segment of fewer rows (an online commit's) is written uncompressed: zstd's set-up per
# column costs more than the few bytes save, and the merge that takes it in compresses.
UNCOMPRESSED_ROWS = 64

Tenant = tuple[str, str]
Range = tuple[int, int]


def sort_key(memory: Memory) -> tuple[str, str, float, str]:
    return (memory.app_name, memory.user_id, memory.created_at, memory.memory_id)


def index_kind_of(index: faiss.Index) -> str:
    if isinstance(index, faiss.IndexHNSW):
        return "hnsw"
    if isinstance(index, faiss.IndexIVF):
        return "ivf"
    return "flat"


def write_segment_files(
    root: Path,
    shard: int,
    name: str,
    memories: Sequence[Memory],
    dim: int,
    index_kind: IndexKind = "auto",
) -> SegmentEntry:
    """Write ``<name>.parquet`` (+ ``<name>.faiss``) for already sorted memories.

    Uncommitted until a manifest lists the returned entry (version 0 here).
    """
    return write_segment_table(root, shard, name, memories_to_table(memories, dim), dim, index_kind)


def write_segment_table(
    root: Path, shard: int, name: str, table: pa.Table, dim: int, index_kind: IndexKind = "auto"
) -> SegmentEntry:
    """``write_segment_files`` for rows already in a sorted ``memory_schema(dim)`` table."""
    return _write(root, shard, name, table, dim, index_kind)[0]


def written_segment(
    root: Path, shard: int, name: str, table: pa.Table, dim: int, index_kind: IndexKind = "auto"
) -> LoadedSegment:
    """:func:`write_segment_table`, returning the segment as a load of its files would
    (entry version 0): a writer that goes on to read it need not read it back."""
    return LoadedSegment.of(shard, *_write(root, shard, name, table, dim, index_kind))


def _write(
    root: Path, shard: int, name: str, table: pa.Table, dim: int, index_kind: IndexKind
) -> tuple[SegmentEntry, pa.Table, np.ndarray | None, faiss.Index | None]:
    """The files written, and what a load of them holds: (entry, table without the
    embedding, vectors, index)."""
    table = table.cast(memory_schema(dim))
    compression = "zstd" if table.num_rows >= UNCOMPRESSED_ROWS else "none"
    atomic_write(
        parquet_path(root, shard, name),
        lambda tmp: pq.write_table(
            table, tmp, compression=compression, row_group_size=ROW_GROUP_SIZE
        ),
    )
    if not dim:
        return (
            SegmentEntry(name=name, rows=table.num_rows, version=0, index=None),
            table,
            None,
            None,
        )
    vectors = table[EMBEDDING].combine_chunks().flatten().to_numpy().reshape(-1, dim)
    index = build_index(vectors, index_kind)
    write_index(index, faiss_path(root, shard, name))
    entry = SegmentEntry(name=name, rows=table.num_rows, version=0, index=index_kind_of(index))
    # As a load: flat and HNSW vectors are a view of the index, IVF's the column's.
    view = flat_vectors(index)
    return entry, table.drop_columns([EMBEDDING]), vectors if view is None else view, index


# Up to this many rows, tenant ranges are found in Python: a polars frame costs more to
# build than a small (online) segment has rows to scan.
SMALL_TABLE_ROWS = 512


def _small_ranges(table: pa.Table) -> tuple[dict[Tenant, Range], dict[str, Range]]:
    apps = table["app_name"].to_pylist()
    users = table["user_id"].to_pylist()
    ranges: dict[Tenant, Range] = {}
    app_ranges: dict[str, Range] = {}
    for spans, keys in ((ranges, list(zip(apps, users, strict=True))), (app_ranges, apps)):
        start = 0
        for row in range(1, len(keys) + 1):
            if row == len(keys) or keys[row] != keys[start]:
                if keys[start] in spans:
                    names = "app_name, user_id" if spans is ranges else "app_name"
                    raise StoreCorrupt(f"segment rows are not sorted by {names}")
                spans[keys[start]] = (start, row)  # type: ignore[index]
                start = row
    return ranges, app_ranges


def tenant_ranges(table: pa.Table) -> tuple[dict[Tenant, Range], dict[str, Range]]:
    """Contiguous [start, end) row range of every (app, user) and every app."""
    if table.num_rows <= SMALL_TABLE_ROWS:
        return _small_ranges(table)
    frame = pl.from_arrow(table.select(["app_name", "user_id"]))
    assert isinstance(frame, pl.DataFrame)  # a Table gives a DataFrame
    frame = frame.with_row_index("row")
    ranges: list[dict[Tenant | str, Range]] = []
    for keys in (["app_name", "user_id"], ["app_name"]):
        spans = frame.group_by(keys, maintain_order=True).agg(
            start=pl.col("row").min(), end=pl.col("row").max() + 1, n=pl.len()
        )
        if (spans["end"] - spans["start"] != spans["n"]).any():
            raise StoreCorrupt(f"segment rows are not sorted by {', '.join(keys)}")
        names = spans.select(keys).rows()
        ranges.append(
            {
                (key if len(keys) == 2 else key[0]): (int(s), int(e))
                for key, s, e in zip(names, spans["start"], spans["end"], strict=True)
            }
        )
    return ranges[0], ranges[1]  # type: ignore[return-value]


@dataclass(eq=False)
class LoadedSegment:
    """A committed segment in memory: rows, vectors, index, tenant ranges."""

    shard: int
    entry: SegmentEntry
    table: pa.Table  # every column except the embedding (that is ``vectors``)
    vectors: np.ndarray | None
    index: faiss.Index | None
    ranges: dict[Tenant, Range]
    app_ranges: dict[str, Range]
    expires: np.ndarray = field(repr=False)  # float64, NaN = never expires
    min_expiry: float = math.inf

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def rows(self) -> int:
        return self.table.num_rows

    @classmethod
    def load(cls, root: Path, shard: int, entry: SegmentEntry, dim: int) -> LoadedSegment:
        ppath = parquet_path(root, shard, entry.name)
        if not ppath.is_file():
            raise StoreCorrupt(f"segment file listed in the manifest is missing: {ppath}")
        index = read_index(faiss_path(root, shard, entry.name)) if entry.index else None
        if index is not None and index.ntotal != entry.rows:
            raise StoreCorrupt(
                f"index {faiss_path(root, shard, entry.name)} holds "
                f"{index.ntotal} vectors, manifest says {entry.rows} rows"
            )
        # Flat/HNSW vectors are a zero-copy view of the memory-mapped index, so
        # the Parquet embedding column is not decoded a second time.
        vectors = flat_vectors(index) if index is not None else None
        columns = [f.name for f in memory_schema(0)]
        try:
            present = set(pq.read_schema(ppath, memory_map=True).names)
            table = with_optional_columns(
                pq.read_table(
                    ppath,
                    memory_map=True,
                    columns=[c for c in columns if c in present or c not in OPTIONAL_FIELDS]
                    + ([EMBEDDING] if dim and vectors is None else []),
                )
            )
        except (OSError, pa.ArrowException) as exc:  # truncated, overwritten, wrong schema
            raise StoreCorrupt(f"cannot read segment {ppath}: {exc}") from exc
        if dim and vectors is None:
            vectors = table[EMBEDDING].combine_chunks().flatten().to_numpy().reshape(-1, dim)
            table = table.drop_columns([EMBEDDING])
        if table.num_rows != entry.rows:
            raise StoreCorrupt(
                f"segment {ppath} has {table.num_rows} rows, manifest says {entry.rows}"
            )
        if vectors is not None and vectors.shape != (entry.rows, dim):
            raise StoreCorrupt(
                f"segment {entry.name}: vectors have shape {vectors.shape}, "
                f"expected ({entry.rows}, {dim})"
            )
        return cls.of(shard, entry, table, vectors, index)

    @classmethod
    def of(
        cls,
        shard: int,
        entry: SegmentEntry,
        table: pa.Table,
        vectors: np.ndarray | None,
        index: faiss.Index | None,
    ) -> LoadedSegment:
        """A segment of rows already read (``table`` without the embedding column)."""
        ranges, app_ranges = tenant_ranges(table)
        expires = table["expires_at"].to_numpy(zero_copy_only=False).astype(np.float64)
        finite = expires[~np.isnan(expires)]
        return cls(
            shard=shard,
            entry=entry,
            table=table,
            vectors=vectors,
            index=index,
            ranges=ranges,
            app_ranges=app_ranges,
            expires=expires,
            min_expiry=float(finite.min()) if len(finite) else math.inf,
        )
