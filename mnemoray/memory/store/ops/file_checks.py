"""Reading a store's files one by one, checked: what ``doctor`` and ``rebuild`` share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.store.index import read_index
from mnemoray.memory.store.layout import LEDGER_DIR, QUARANTINE_DIR
from mnemoray.memory.store.rows import OPTIONAL_FIELDS, memory_schema
from mnemoray.memory.store.segment import tenant_ranges

DAMAGED_DIR = "damaged"  # under quarantine/: files a repair set aside, never served or gc'd


def read_segment_table(path: Path, entry_rows: int | None, dim: int) -> pa.Table:
    """The whole segment, checked (rows, schema, sorted tenants); StoreCorrupt if not usable."""
    if not path.is_file():
        raise StoreCorrupt("the Parquet file is missing")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise StoreCorrupt(f"the Parquet file is unreadable ({exc})") from exc
    if entry_rows is not None and table.num_rows != entry_rows:
        raise StoreCorrupt(f"it has {table.num_rows} rows, the manifest says {entry_rows}")
    # OPTIONAL_FIELDS came later: a segment written before them is complete without them.
    missing = set(memory_schema(dim).names) - set(table.column_names) - set(OPTIONAL_FIELDS)
    if missing:
        raise StoreCorrupt(f"columns missing: {', '.join(sorted(missing))}")
    tenant_ranges(table)  # raises if rows are not sorted by tenant
    return table


def check_index(path: Path, rows: int) -> str | None:
    """Why the index at ``path`` cannot serve ``rows`` rows (None: it can)."""
    try:
        index = read_index(path, mmap=False)
    except StoreCorrupt as exc:
        return str(exc)
    if index.ntotal != rows:
        return f"it holds {index.ntotal} vectors for {rows} rows"
    return None


def set_aside(root: Path, path: Path, stamp: str) -> None:
    """Move a damaged file under ``quarantine/damaged/<stamp>/`` (kept, never served)."""
    if not path.exists():
        return
    dest = root / QUARANTINE_DIR / DAMAGED_DIR / stamp / path.relative_to(root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(dest))


def count_ledger(root: Path, names: list[str]) -> int:
    if not names:
        return 0
    hashes = pa.concat_arrays(
        [
            pq.read_table(root / LEDGER_DIR / n, columns=["session_hash"])[
                "session_hash"
            ].combine_chunks()
            for n in names
        ]
    )
    return len(hashes.unique())


__all__ = ["DAMAGED_DIR", "check_index", "count_ledger", "read_segment_table", "set_aside"]
