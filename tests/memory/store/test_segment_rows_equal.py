"""``rows_to_memories`` gives the records the code before it gave (one ``Table.take`` of the
rows, ``to_pylist``, a record per row dict: ``benchmarks/records_bench.py``), field for
field, of the same types, in the same order, embeddings included: on one-chunk and
many-chunk tables, columns chunked apart, for random, empty, out-of-order and repeated rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.records_bench import memories, rows_to_memories_take, same
from mnemoray.memory.store.rows import (
    EMBEDDING,
    OPTIONAL_FIELDS,
    memories_to_table,
    memory_schema,
    rows_to_memories,
    with_optional_columns,
)

N = 3_000


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pa.Table]:
    table = memories_to_table(memories(N, 3, seed=5), 0)
    path = tmp_path_factory.mktemp("seg") / "seg.parquet"
    pq.write_table(table, path, row_group_size=700)  # read back in 5 chunks
    read = pq.read_table(path, memory_map=True)
    assert read["memory_id"].num_chunks == 5
    old = table.drop_columns(list(OPTIONAL_FIELDS))
    return {
        "one chunk": table,
        "row groups": read,
        "one-row chunks": pa.concat_tables(
            [table.slice(i, 1) for i in range(40)] + [table.slice(40, N - 40)]
        ),
        "uneven chunks": pa.concat_tables(
            [
                table.slice(0, 1),
                table.slice(1, 998),
                table.slice(999, 2),
                table.slice(1001, N - 1001),
            ]
        ),
        # A segment written before the optional columns: those load as one null chunk
        # beside the others' row-group chunks.
        "columns chunked apart": with_optional_columns(
            pa.concat_tables([old.slice(0, 1200), old.slice(1200, N - 1200)])
        ),
    }


def row_sets(rng: np.random.Generator) -> list[object]:
    return [
        [],
        np.array([], dtype=np.int64),
        [0],
        [N - 1],
        [699, 700, 701, 1399, 1400],
        [2999, 0, 1500, 3, 2],
        [7, 7, 7],
        [40, 39, 41, 0, 1, 40],
        rng.integers(0, N, 5),
        rng.integers(0, N, 50),
        rng.integers(0, N, 400),
        np.arange(650, 2050),
        np.arange(N)[::-1],
        rng.permutation(N),
        np.array([5, 9], dtype=np.int32),
        [np.int64(12), 13],
    ]


@pytest.mark.parametrize(
    "name", ["one chunk", "row groups", "one-row chunks", "uneven chunks", "columns chunked apart"]
)
@pytest.mark.parametrize("with_vectors", [True, False])
def test_records_equal_the_take_of_the_rows(
    tables: dict[str, pa.Table], name: str, with_vectors: bool
) -> None:
    table = tables[name]
    rng = np.random.default_rng(len(name))
    vectors = rng.standard_normal((N, 8)).astype(np.float32) if with_vectors else None
    for rows in row_sets(rng):
        got = rows_to_memories(table, rows, vectors)
        want = rows_to_memories_take(table, rows, vectors)
        assert len(got) == len(rows)
        assert same(got, want), (name, rows)
        assert [m == w for m, w in zip(got, want, strict=True)] == [True] * len(got)
        if vectors is not None:
            for m, row in zip(got, np.asarray(rows, dtype=np.int64), strict=True):
                # Its own copy of the row, not a view of the segment's vectors.
                assert m.embedding.flags.owndata and not np.shares_memory(m.embedding, vectors)
                assert m.embedding.tobytes() == vectors[row].tobytes()


def test_filled_columns_are_exercised(tables: dict[str, pa.Table]) -> None:
    """The fixture holds what the conversion has to get right: nulls, empty and filled
    lists, an edit history, agent scopes (else the equality above proves little)."""
    got = rows_to_memories(tables["row groups"], np.arange(N), None)
    assert any(m.previous_versions for m in got) and any(not m.previous_versions for m in got)
    assert {m.agent_name for m in got} == {"", "planner"}
    assert any(m.expires_at is None for m in got) and any(m.expires_at for m in got)
    assert any(m.session_events is None for m in got) and any(m.key_facts for m in got)
    assert any(m.edited_by for m in got) and any(m.open_threads for m in got)
    old = rows_to_memories(tables["columns chunked apart"], [0, 2999], None)
    assert [m.agent_name for m in old] == ["", ""] and old[0].open_threads == ()


def test_a_table_with_the_embedding_column() -> None:
    """The store's write path hands the table without it; a table with it gives the
    embedding its own column held (to_pylist's list), then the vector given."""
    mems = memories(30, 1, seed=2)
    dim = 4
    mems = [m.with_embedding(np.full(dim, i, np.float32)) for i, m in enumerate(mems)]
    table = memories_to_table(mems, dim)
    assert EMBEDDING in table.column_names and table.schema == memory_schema(dim)
    vectors = np.arange(30 * dim, dtype=np.float32).reshape(30, dim)
    for rows in ([3, 1, 3], list(range(30))):
        assert same(
            rows_to_memories(table, rows, vectors), rows_to_memories_take(table, rows, vectors)
        )


def test_column_arrays_are_kept_only_while_the_table_lives() -> None:
    import gc

    from mnemoray.memory.store import rows as memory_rows

    table = memories_to_table(memories(20, 1, seed=3), 0)
    first = rows_to_memories(table, [4, 2], None)
    assert id(table) in memory_rows._COLUMNS
    assert same(rows_to_memories(table, [4, 2], None), first)  # from the kept arrays
    key = id(table)
    del table
    gc.collect()
    assert key not in memory_rows._COLUMNS
