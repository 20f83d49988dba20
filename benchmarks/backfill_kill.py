"""Kill a real backfill job part way: what ``tests/backfill/test_kills.py`` and
``benchmarks/reliability.py`` share.

The job is ``python -m mnemoray.jobs.backfill`` on the Ray Data engine, in its own process
group with the local Ray it starts (GCS, raylet, workers). ``kill_at`` SIGKILLs it
once the store's ledger (polled) holds a number of sessions, either
- ``driver``: the driver process alone (what it left of its Ray is killed afterwards), or
- ``ray``: the whole process group at once, the driver and every Ray process.
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

from benchmarks.serve_process import group_pids
from mnemoray.memory.store.parquet.store import MemoryStore

REPO = Path(__file__).resolve().parents[1]
Served = Counter[tuple[str, str, str, str, str]]


def start_job(archive: Path, store: Path, *args: str) -> subprocess.Popen:
    """``python -m mnemoray.jobs.backfill --archive A --store S --json ARGS`` on a new local Ray."""
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    environ.update(HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemoray.jobs.backfill",
            "--archive",
            str(archive),
            "--store",
            str(store),
            "--progress-every",
            "0",
            "--json",
            *args,
        ],
        cwd=REPO,
        env=environ,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def committed(store: Path) -> int:
    """Sessions in the store's ledger (0 before the first commit)."""
    if not (store / "manifest.json").exists():
        return 0
    return MemoryStore(store).manifest().ledger_sessions


def names(pids: set[int]) -> set[str]:
    out = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            out.add(Path(f"/proc/{pid}/comm").read_text().strip())
    return out


def served(store: Path) -> Served:
    """Every live memory as (app, user, memory id, session, content hash), counted."""
    return Counter(
        (m.app_name, m.user_id, m.memory_id, m.session_id, m.content_hash)
        for m in MemoryStore(store).load().iter_memories()
    )


def kill_at(
    proc: subprocess.Popen, store: Path, target: int, kill: str, timeout_s: float = 240
) -> None:
    """SIGKILL the job (``kill``: its driver, or its whole process group) once the ledger
    holds ``target`` sessions."""
    deadline = time.monotonic() + timeout_s
    try:
        while committed(store) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is not None:
            raise RuntimeError(f"the job ended before the kill: {proc.communicate()}")
        members = group_pids(proc.pid)
        if kill == "driver":
            os.kill(proc.pid, signal.SIGKILL)
        else:  # the whole local Ray with its driver
            if not {"raylet", "gcs_server"} <= names(members):
                raise RuntimeError(f"no local Ray in the job's group: {names(members)}")
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        if proc.returncode != -signal.SIGKILL:
            raise RuntimeError(f"the job was not killed: rc {proc.returncode}")
        if kill == "ray":
            time.sleep(0.5)
            if group_pids(proc.pid) & members:
                raise RuntimeError("Ray processes outlived the kill of their group")
    finally:
        with contextlib.suppress(ProcessLookupError):  # what the driver left behind
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)


__all__ = ["committed", "kill_at", "names", "served", "start_job"]
