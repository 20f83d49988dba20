"""Two backfills of one archive into one store at the same time, as two processes
(a scheduled job overlapping a manual one): every session once, the same content
as one clean run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.memory.store.parquet.store import MemoryStore
from tests.support.archive_gen import make_archive

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(archive: Path, store: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(HF_HUB_OFFLINE="1")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemoray.cli",
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(store),
            "--in-process",
            "--embedder",
            "none",
            "--shards",
            "2",
            "--commit-every",
            "3",
            "--progress-every",
            "0",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _content(store: Path) -> Counter:
    snap = MemoryStore(store).load()
    return Counter(
        (m.app_name, m.user_id, m.session_id, m.kind, m.text) for m in snap.iter_memories()
    )


def test_two_concurrent_backfills_store_each_session_once(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    make_archive(archive, 30, files=2, bad=False)
    clean = tmp_path / "clean"
    backfill(
        BackfillConfig(
            archive=archive,
            store=clean,
            embedder="none",
            shards=2,
            commit_every=3,
            progress_interval_s=0,
        )
    )
    store = tmp_path / "store"
    procs = [_run(archive, store) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    got, want = _content(store), _content(clean)
    assert got == want
    assert max(got.values()) == 1  # no memory twice
    ids = [m.memory_id for m in MemoryStore(store).load().iter_memories()]
    assert len(ids) == len(set(ids))
    assert MemoryStore(store).manifest().ledger_sessions == 30
