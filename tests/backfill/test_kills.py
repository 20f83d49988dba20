"""Kill a real backfill job part way, again and again; the store ends as a clean run leaves it.

The job is ``python -m mnemoray.jobs.backfill`` on the Ray Data engine, in its own process
group with the local Ray it starts (GCS, raylet, workers). It is SIGKILLed once the
store's ledger (polled) holds 10% of the archive's sessions, re-run and killed again at
30%, re-run and killed at 60%, then re-run to the end. A kill is either
- ``driver``: the driver process alone (what it left of its Ray is killed afterwards), or
- ``ray``: the whole process group at once, the driver and every Ray process.
After each kill the store serves a subset of what a clean run serves, each memory once;
each re-run counts every session committed before it as a ledger hit and does not
redo it; at the end the store serves exactly what a clean run serves (same memory ids,
owners and content, each once, also physically in the committed segments).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
from pathlib import Path

import polars as pl
import pytest

from benchmarks.backfill_kill import Served, committed, kill_at, served, start_job
from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.memory.store.layout import parquet_path
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports
from tests.support.archive_gen import make_archive

SESSIONS, EVERY = 48, 3  # 16 commits
pytestmark = [pytest.mark.ray, pytest.mark.slow]  # its own local Ray, in a subprocess


def start(archive: Path, store: Path) -> subprocess.Popen:
    return start_job(
        archive,
        store,
        "--shards",
        "2",
        "--embedder",
        "none",
        "--commit-every",
        str(EVERY),
        "--batch-size",
        str(EVERY),
    )


def committed_rows(store: Path) -> pl.DataFrame:
    m = MemoryStore(store).manifest()
    files = [
        parquet_path(store, shard, e.name)
        for shard, entries in enumerate(m.segments)
        for e in entries
    ]
    return pl.read_parquet(files).select("app_name", "user_id", "memory_id")


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kills") / "archive"
    make_archive(root, SESSIONS, files=2, bad=False)
    return root


@pytest.fixture(scope="module")
def clean(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """What a clean (never killed) run serves."""
    store = tmp_path_factory.mktemp("clean") / "store"
    report = backfill(BackfillConfig(archive, store, shards=2, embedder=None, commit_every=EVERY))
    assert report.sessions_committed == SESSIONS
    out = served(store)
    assert max(out.values()) == 1
    return out


def record_of(store: Path, run_ids: set[str]) -> dict:
    """The run record of the one run not in ``run_ids``."""
    (new,) = [r for r in read_run_reports(store) if r["run_id"] not in run_ids]
    return new


@pytest.mark.parametrize("kill", ["driver", "ray"])
def test_job_killed_at_10_30_60_percent_reruns_to_a_clean_store(
    tmp_path: Path, archive: Path, clean: Served, kill: str
) -> None:
    store = tmp_path / "store"
    seen: set[str] = set()
    before = 0  # sessions committed before the run
    for share in (0.1, 0.3, 0.6):
        # At least two commits of this run: its record then holds its ledger hits.
        target = max(math.ceil(share * SESSIONS), before + 2 * EVERY)
        kill_at(start(archive, store), store, target, kill)
        now = committed(store)
        assert target <= now < SESSIONS, (share, now)  # killed part way
        record = record_of(store, seen)
        seen.add(record["run_id"])
        assert record["status"] == "running"  # killed: it never finished
        counts = record["counts"]
        assert counts["ledger_hits"] == counts["skipped"] == before  # nothing redone
        # The record is written at each commit: at most the commit under way is missing.
        assert now - EVERY <= before + counts["sessions_committed"] <= now
        assert record["commit_timeline"][-1]["sessions"] == counts["sessions_committed"]
        partial = served(store)
        assert max(partial.values()) == 1 and set(partial) < set(clean)
        before = now

    rerun = start(archive, store)
    out, err = rerun.communicate(timeout=300)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(rerun.pid, signal.SIGKILL)
    assert rerun.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["ledger_hits"] == report["skipped"] == before  # its work is not redone
    assert report["sessions_committed"] == SESSIONS - before
    assert report["memories_written"] == sum(clean.values()) - sum(partial.values())

    assert served(store) == clean  # same memories, each once, nothing lost
    rows = committed_rows(store)
    assert rows.height == len(clean) and not rows.is_duplicated().any()
    assert [r["status"] for r in read_run_reports(store)] == ["running"] * 3 + ["succeeded"]
