"""Every Ray the project starts listens on loopback only (mnemoray/ray_local.py).

The listening sockets of a command's whole process tree are read from /proc while it
runs: ``mnemoray backfill`` on its default local Ray, and the start the Serve app, the
demo and the test suite's cluster share (``start_ray``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemoray.ray_local import AUTH_MODE_ENV, AUTH_TOKEN_ENV, LOOPBACK_RAY_ENV, local_ray_options
from tests.support.sockets import HAS_PROC_NET, is_loopback, listening, process_tree

ROOT = Path(__file__).resolve().parents[1]
LINUX = pytest.mark.skipif(not HAS_PROC_NET, reason="needs Linux /proc")


def test_a_new_local_ray_is_bound_to_loopback_and_a_given_cluster_is_joined_as_is() -> None:
    kwargs, env = local_ray_options(None, environ={})
    assert kwargs["address"] == "local" and kwargs["include_dashboard"] is False
    assert kwargs["_node_ip_address"] == "127.0.0.1"
    assert env.items() >= LOOPBACK_RAY_ENV.items()
    # Token authentication with a token of its own: each new instance gets another.
    assert env[AUTH_MODE_ENV] == "token" and len(env[AUTH_TOKEN_ENV]) == 64
    assert local_ray_options(None, environ={})[1][AUTH_TOKEN_ENV] != env[AUTH_TOKEN_ENV]
    joined, env = local_ray_options(None, environ={"RAY_ADDRESS": "10.0.0.5:6379"})
    assert joined["address"] == "10.0.0.5:6379" and "_node_ip_address" not in joined
    assert env == {}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(ROOT)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _watch(proc: subprocess.Popen[str], until_s: float) -> set[str]:
    """Every listening address the process tree held while it ran (polled)."""
    seen: set[str] = set()
    deadline = time.monotonic() + until_s
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= listening(process_tree(proc.pid))
        time.sleep(0.2)
    return seen


START_RAY = """
import sys
from mnemoray.ray_local import start_ray
start_ray(None, {})
import ray
ray.get(ray.remote(lambda: 1).remote())  # a worker too
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.ray
@LINUX
def test_the_shared_start_listens_on_loopback_only(tmp_path: Path) -> None:
    """What ``mnemoray serve``, the demo and the test cluster start."""
    script = tmp_path / "start.py"
    script.write_text(START_RAY)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(2)  # agents start their servers shortly after the node
        held = listening(process_tree(proc.pid))
        assert len(held) >= 3, held  # GCS, raylet, workers at least
        assert [a for a in held if not is_loopback(a)] == []
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)


@pytest.mark.ray
@LINUX
def test_backfill_on_its_local_ray_listens_on_loopback_only(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "backfill.log"
    with log.open("w") as out:  # a file, not a pipe: the run never blocks on its output
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mnemoray.cli",
                "backfill",
                "--archive",
                str(ROOT / "examples" / "archive.jsonl"),
                "--store",
                str(store),
                "--embedder",
                "none",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            text=True,
            cwd=tmp_path,
        )
    try:
        held = _watch(proc, until_s=240)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, log.read_text()
    assert len(held) >= 3, held  # GCS, raylet, workers at least
    assert [a for a in held if not is_loopback(a)] == []
