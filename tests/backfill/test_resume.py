"""Kill a real backfill job (twice), re-run it: every session exactly once, nothing lost.

The job is `python -m mnemoray.jobs.backfill` in a subprocess with its own local Ray:
- run 1 dies right after a chunk's segment files are written and before its
  manifest commit (``MNEMORAY_CRASH_AFTER=prepare:3``: ``os._exit`` in that spot);
- run 2 is SIGKILLed from outside as soon as it has committed one chunk;
- run 3 finishes.
Each run's process group (driver + its Ray processes) is SIGKILLed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.faults import CRASH_ENV, CRASH_EXIT_CODE
from mnemoray.memory.store.layout import INDEX_DIR, MEMORIES_DIR, faiss_path, parquet_path
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports
from tests.support.archive_gen import make_archive

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 60
pytestmark = [pytest.mark.ray, pytest.mark.slow]  # its own local Ray, in a subprocess


def start(archive: Path, store: Path, **env: str) -> subprocess.Popen:
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    environ.update(HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0", **env)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemoray.jobs.backfill",
            "--archive",
            str(archive),
            "--store",
            str(store),
            "--shards",
            "2",
            "--commit-every",
            "4",
            "--batch-size",
            "4",
            "--progress-every",
            "0",
        ],
        cwd=ROOT,
        env=environ,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def reap(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    """Wait for the driver, then SIGKILL what is left of its process group (its Ray)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


def version(store: Path) -> int:
    return MemoryStore(store).manifest().version if (store / "manifest.json").exists() else 0


def segment_files(store: Path) -> set[Path]:
    return {p for sub in (MEMORIES_DIR, INDEX_DIR) for p in (store / sub).rglob("*") if p.is_file()}


def listed_files(store: Path) -> set[Path]:
    m = MemoryStore(store).manifest()
    out = set()
    for shard, entries in enumerate(m.segments):
        for e in entries:
            out.add(parquet_path(store, shard, e.name))
            if e.index:
                out.add(faiss_path(store, shard, e.name))
    return out


def test_killed_backfill_resumes_exactly_once(tmp_path: Path) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    bad = make_archive(archive, SESSIONS, files=4)

    # Run 1: dies between writing its third chunk's segments and committing them.
    code, out = reap(start(archive, store, **{CRASH_ENV: "prepare:3"}))
    assert code == CRASH_EXIT_CODE, out
    assert "crashing at 'prepare'" in out
    committed = MemoryStore(store).manifest()
    assert 0 < committed.ledger_sessions < SESSIONS
    # A worker of the killed run may still be finishing an atomic write: its temp file
    # then takes its final name, so only finished files are counted.
    orphans = {p for p in segment_files(store) - listed_files(store) if not p.name.endswith(".tmp")}
    assert orphans  # the prepared chunk: on disk, in no manifest
    snap = MemoryStore(store).load()
    served = {seg.name for shard in snap.segments for seg in shard}
    assert not served & {p.stem for p in orphans}  # never served

    # Run 2: SIGKILL from outside once it has committed something more.
    proc = start(archive, store)
    v0, deadline = version(store), time.monotonic() + 240
    while version(store) == v0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    code, out = reap(proc)
    assert code == -signal.SIGKILL, out
    assert version(store) > v0

    # Run 3: finishes; then every session is stored exactly once.
    code, out = reap(start(archive, store))
    assert code == 0, out
    assert f"sessions read: {SESSIONS + bad}" in out
    final = MemoryStore(store)
    assert final.manifest().ledger_sessions == SESSIONS
    assert final.quarantine_count() == bad

    live = Counter((m.session_id, m.content_hash) for m in final.load().iter_memories())
    assert max(live.values()) == 1
    reference = tmp_path / "reference"
    backfill(BackfillConfig(archive, reference, shards=2, embedder=None))
    expected = {
        (m.session_id, m.content_hash) for m in MemoryStore(reference).load().iter_memories()
    }
    assert set(live) == expected
    # Physically too: every committed row (live or not) once.
    rows = pl.read_parquet([p for p in listed_files(store) if p.suffix == ".parquet"])
    assert rows.select("session_id", "content_hash").is_duplicated().sum() == 0
    assert rows.height == len(expected)

    # The killed runs' prepared files are orphans: never listed, and gc removes them.
    leftovers = segment_files(store) - listed_files(store)
    assert orphans <= leftovers
    removed = set(final.gc())
    assert leftovers <= removed and segment_files(store) == listed_files(store)
    assert {(m.session_id, m.content_hash) for m in final.load().iter_memories()} == expected

    statuses = [r["status"] for r in read_run_reports(store)]
    assert statuses == ["running", "running", "succeeded"]  # the killed ones never finished
