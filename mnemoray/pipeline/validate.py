"""Validate rows, quarantine the bad ones, skip sessions the ledger already holds.

The in-process steps ``validate_rows`` and ``skip_processed`` run here as they
are; bad rows go to the store's quarantine from the worker (each call writes
its own file, so parallel workers never interleave) and are counted in the
batch's stats row, never dropped silently.
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.backfill.busy import Busy, add_busy
from mnemoray.backfill.report import count_ledger_hits
from mnemoray.backfill.steps import skip_processed, validate_rows
from mnemoray.memory.store.protocol import open_backend
from mnemoray.pipeline.read import READ_CPU, READ_S, ROW
from mnemoray.pipeline.rows import pack


def validate_batch(batch: pa.Table, store_dir: str, shards: int) -> pa.Table:
    busy = Busy()
    rows = [pickle.loads(b) for b in batch.column(ROW).to_pylist()]
    read_s = float(pc.sum(batch.column(READ_S)).as_py() or 0.0)
    read_cpu = float(pc.sum(batch.column(READ_CPU)).as_py() or 0.0)
    good, bad = validate_rows(rows)
    store = open_backend(store_dir, shards)
    if bad:
        store.quarantine(bad)
    todo, skipped = skip_processed(store, good)
    stats = {
        "read": len(rows),
        "skipped": skipped,
        "ledger_hits": count_ledger_hits(good, todo),
        "quarantined": len(bad),
        **busy.tally("validate"),
    }
    add_busy(stats, "read", read_s, read_cpu)
    return pack(todo, [stats])
