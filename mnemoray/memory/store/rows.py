"""The memory table: its columns, and records to rows and back.

A segment (:mod:`mnemoray.memory.store.segment`) holds these rows in Parquet; recall turns the
rows it returns back into records (``rows_to_memories``), as does the store's write path.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from mnemoray.memory.records.record import Memory, MemoryVersion

STRING_FIELDS = (
    "memory_id",
    "app_name",
    "user_id",
    "session_id",
    "kind",
    "text",
    "key_text",
    "content_hash",
)
LIST_FIELDS = (
    "topics",
    "key_facts",
    "entities",
    "source_event_ids",
    "open_threads",
    "decisions",
    "commitments",
)
FLOAT_FIELDS = (
    "event_time_start",
    "event_time_end",
    "created_at",
    "expires_at",
    "session_updated_at",
    "edited_at",
)
INT_FIELDS = ("session_events",)
NULLABLE_STRING_FIELDS = ("edited_by", "agent_name")  # agent_name null = ""
VERSIONS = "previous_versions"
VERSION_TYPE = pa.struct(
    [
        pa.field("memory_id", pa.string()),
        pa.field("text", pa.string()),
        pa.field("written_at", pa.float64()),
        pa.field("written_by", pa.string()),
    ]
)
# Columns added after the first stores were written: a segment without them loads
# with nulls (version unknown, nothing open, never edited), see ``with_optional_columns``.
OPTIONAL_FIELDS = (
    "session_events",
    "session_updated_at",
    "open_threads",
    "decisions",
    "commitments",
    "edited_at",
    "edited_by",
    VERSIONS,
    "agent_name",
)
EMBEDDING = "embedding"


def memory_schema(dim: int) -> pa.Schema:
    fields = [pa.field(name, pa.string(), nullable=False) for name in STRING_FIELDS]
    fields += [pa.field(name, pa.list_(pa.string())) for name in LIST_FIELDS]
    fields += [pa.field(name, pa.float64(), nullable=name != "created_at") for name in FLOAT_FIELDS]
    fields += [pa.field(name, pa.int64()) for name in INT_FIELDS]
    fields += [pa.field(name, pa.string()) for name in NULLABLE_STRING_FIELDS]
    fields.append(pa.field(VERSIONS, pa.list_(VERSION_TYPE)))
    fields.append(pa.field("shard", pa.int32(), nullable=False))
    if dim:
        fields.append(pa.field(EMBEDDING, pa.list_(pa.float32(), dim), nullable=False))
    return pa.schema(fields)


def memories_to_table(memories: Sequence[Memory], dim: int) -> pa.Table:
    columns: dict[str, pa.Array] = {}
    for name in STRING_FIELDS + FLOAT_FIELDS + INT_FIELDS + NULLABLE_STRING_FIELDS:
        columns[name] = [getattr(m, name) for m in memories]
    for name in LIST_FIELDS:
        columns[name] = [list(getattr(m, name)) for m in memories]
    columns[VERSIONS] = [[v.to_dict() for v in m.previous_versions] for m in memories]
    columns["shard"] = [m.shard for m in memories]
    if dim:
        flat = (
            np.concatenate(
                [np.asarray(m.embedding, dtype=np.float32).reshape(dim) for m in memories]
            )
            if memories
            else np.zeros(0, np.float32)
        )
        columns[EMBEDDING] = pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)
    return pa.table(columns, schema=memory_schema(dim))


def with_optional_columns(table: pa.Table) -> pa.Table:
    """``table`` with null ``OPTIONAL_FIELDS`` it lacks (a segment written before them)."""
    schema = memory_schema(0)
    for name in OPTIONAL_FIELDS:
        if name not in table.column_names:
            table = table.append_column(
                schema.field(name), pa.nulls(table.num_rows, schema.field(name).type)
            )
    return table


# How rows become records (benchmarks/README.md, "Materialising records"): up to
# BY_VALUE_ROWS rows, each value is read where it lies, with no copy of the rows (a
# recall's few records); more are taken, from the chunk that holds each: a take over a
# table of several chunks first joins them, a copy of every column. That join costs
# about as much as a take from one chunk per JOIN_ROWS_PER_CHUNK rows of the table, so a
# take touching more chunks joins them. From BY_COLUMN_ROWS rows on, each column is
# converted at once instead of value by value.
BY_VALUE_ROWS = 8
BY_COLUMN_ROWS = 1000
JOIN_ROWS_PER_CHUNK = 4000


def rows_to_memories(
    table: pa.Table, rows: Sequence[int] | np.ndarray, vectors: np.ndarray | None
) -> list[Memory]:
    """Memories for the given row numbers; embeddings are copied out of the segment.

    The values are those of ``table.take(rows).to_pylist()``, lists as tuples."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return []
    if rows.min() < 0 or rows.max() >= table.num_rows:
        raise IndexError(f"rows out of range for a table of {table.num_rows} rows")
    if len(rows) <= BY_VALUE_ROWS:
        names, columns = _columns(table)
        values = [
            _fixed(dict(zip(names, [column[row].as_py() for column in columns], strict=True)))
            for row in rows.tolist()
        ]
    else:
        values = _taken(table, rows)
    return [
        Memory.stored(raw, None if vectors is None else np.array(vectors[row], dtype=np.float32))
        for row, raw in zip(rows.tolist(), values, strict=True)
    ]


# A table's column arrays, kept while it lives (a segment's, as long as its snapshot):
# making them again is a good part of reading a recall's few records.
_COLUMNS: dict[int, tuple[weakref.ref[pa.Table], list[str], list[Any]]] = {}


def _columns(table: pa.Table) -> tuple[list[str], list[Any]]:
    key = id(table)
    found = _COLUMNS.get(key)
    if found is not None and found[0]() is table:
        return found[1], found[2]
    columns = [c.chunk(0) if c.num_chunks == 1 else c for c in table.columns]
    _COLUMNS[key] = (
        weakref.ref(table, lambda _: _COLUMNS.pop(key, None)),
        table.column_names,
        columns,
    )
    return table.column_names, columns


def _taken(table: pa.Table, rows: np.ndarray) -> list[dict[str, Any]]:
    """The rows' values (in the order asked), taken from the chunk that holds each."""
    batches = table.to_batches()  # every column cut at the same rows
    if len(batches) == 1:
        return _values(batches[0].take(rows))
    starts = np.cumsum([0] + [b.num_rows for b in batches])
    which = np.searchsorted(starts, rows, side="right") - 1
    chunks = np.unique(which).tolist()
    if len(chunks) * JOIN_ROWS_PER_CHUNK > table.num_rows:
        return _values(table.take(rows))
    out: list[dict[str, Any]] = [{}] * len(rows)
    for j in chunks:
        at = np.flatnonzero(which == j)
        for i, raw in zip(at.tolist(), _values(batches[j].take(rows[at] - starts[j])), strict=True):
            out[i] = raw
    return out


def _values(taken: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    if taken.num_rows < BY_COLUMN_ROWS:
        return [_fixed(raw) for raw in taken.to_pylist()]
    names = taken.schema.names
    by_column = [
        _column_values(
            name, column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        )
        for name, column in zip(names, taken.columns, strict=True)
    ]
    return [dict(zip(names, record, strict=True)) for record in zip(*by_column, strict=True)]


def _fixed(raw: dict[str, Any]) -> dict[str, Any]:
    """A row's ``as_py`` values as a record holds them."""
    for name in LIST_FIELDS:
        raw[name] = tuple(raw[name] or ())
    raw[VERSIONS] = _versions(raw[VERSIONS])
    raw["agent_name"] = raw["agent_name"] or ""  # null: written before scopes, shared
    return raw


def _versions(raw: list[dict[str, Any]] | None) -> tuple[MemoryVersion, ...]:
    return tuple(MemoryVersion.from_dict(v) for v in raw or ())


def _column_values(name: str, column: pa.Array) -> list[Any]:
    """One column's values as ``_fixed`` leaves them, converted in C where the type allows
    (``as_py`` value by value makes a scalar object for each)."""
    if name in LIST_FIELDS:  # null: ()
        offsets = (column.offsets.to_numpy() - column.offsets[0].as_py()).tolist()
        flat = column.flatten().to_numpy(zero_copy_only=False).tolist()
        out = [tuple(flat[offsets[i] : offsets[i + 1]]) for i in range(len(column))]
        return _nulls_as(column, out, ())
    if name == VERSIONS:
        if column.null_count == len(column) or not len(column.flatten()):
            return [()] * len(column)
        return [_versions(v) for v in column.to_pylist()]
    if name == "agent_name":
        return [v or "" for v in _column_values("", column)]
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_numpy(zero_copy_only=False).tolist()  # null: None
    if pa.types.is_floating(kind) or pa.types.is_integer(kind):
        filled = column.fill_null(0) if column.null_count else column
        return _nulls_as(column, filled.to_numpy().tolist(), None)
    return column.to_pylist()


def _nulls_as(column: pa.Array, values: list[Any], null: object) -> list[Any]:
    if column.null_count:
        for i in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)).tolist():
            values[i] = null
    return values
