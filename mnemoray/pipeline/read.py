"""Read the archive: one task per file, through the core reader.

``mnemoray.backfill.archive.iter_archive_file`` is the ONE reader and parser: Parquet
(projected to the columns the parser reads, so unrelated columns are never
decoded), JSONL and ADK JSON. It never raises on a bad row: a row that is
not JSON, not UTF-8, or not a valid session comes back with its location
and error, and ``validate`` quarantines it. Ray's own ``read_parquet`` /
``read_json`` would stop the whole job at the first malformed line, and
would hand the ledger a differently shaped row than the in-process path
(the ledger key is the hash of the raw row), so they are not used here.

Parallelism is one task per file (``many files`` is the archive layout the
design asks for); rows stream out in chunks of ``READ_CHUNK``.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from mnemoray.backfill.archive import archive_files, iter_archive_file
from mnemoray.backfill.busy import Busy

ROW, READ_S, READ_CPU = "row", "read_s", "read_cpu_s"
READ_CHUNK = 256
SCHEMA = pa.schema([(ROW, pa.binary()), (READ_S, pa.float64()), (READ_CPU, pa.float64())])


def file_rows(archive: str | Path) -> list[dict[str, str]]:
    """One row per archive file: its path and the name used in row locations."""
    return [{"path": str(path), "name": name} for path, name in archive_files(archive)]


def _table(rows: list[bytes], busy: Busy) -> pa.Table:
    wall, cpu = busy.elapsed()
    rest = [0.0] * (len(rows) - 1)
    return pa.table({ROW: rows, READ_S: [wall, *rest], READ_CPU: [cpu, *rest]}, schema=SCHEMA)


def read_files(batch: pa.Table) -> Iterator[pa.Table]:
    """Every row of the batch's files as pickled ``ArchiveRow``s (with the time spent)."""
    for path, name in zip(
        batch.column("path").to_pylist(), batch.column("name").to_pylist(), strict=True
    ):
        rows: list[bytes] = []
        busy = Busy()
        for row in iter_archive_file(path, name):
            rows.append(pickle.dumps(row, protocol=pickle.HIGHEST_PROTOCOL))
            if len(rows) >= READ_CHUNK:
                yield _table(rows, busy)
                rows, busy = [], Busy()
        if rows:
            yield _table(rows, busy)
