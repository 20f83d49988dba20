"""A real ``mnemoray`` server in a child process, for the benchmarks that drive one.

``Server`` starts ``mnemoray.serve.app.run_local`` (what ``mnemoray serve`` runs) on a NEW
local Ray instance in its own session, so a benchmark can stop it politely or
SIGKILL its whole process tree (driver, raylet, GCS, proxy, replicas) at once.
The tree is read from ``/proc`` (no psutil): CPU seconds by role, resident memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parents[1]
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(
    method: str,
    url: str,
    body: bytes | None = None,
    timeout: float = 10.0,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url,
        data=body,
        method=method,
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _server_main(spec: dict[str, Any]) -> None:
    """Child process: a local Ray + Serve running the app."""
    from mnemoray.serve.app import run_local

    # Always a new local Ray instance: other Ray clusters may run on this machine.
    run_local(
        {**spec["settings"], "server.host": "127.0.0.1", "server.port": spec["port"]},
        address="local",
    )


def wait_healthy(
    proc: subprocess.Popen[bytes], base: str, timeout_s: float, name: str, poll_s: float = 0.5
) -> float:
    """Seconds until ``base``/healthz answers 200; RuntimeError naming ``name`` if ``proc``
    exits or ``timeout_s`` passes first."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited ({proc.returncode})")
        try:
            if http("GET", base + "/healthz", timeout=2)[0] == 200:
                return time.perf_counter() - start
        except OSError:
            pass
        time.sleep(poll_s)
    raise RuntimeError(f"{name} not ready after {timeout_s:.0f} s")


class Server:
    """``settings``: dotted keys of mnemoray.settings.serve (``server.api_keys`` included);
    without API keys the API is open on 127.0.0.1."""

    def __init__(
        self, store_dir: Path, settings: dict[str, Any], env: dict[str, str], log_path: Path
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        spec = {"settings": {"store": str(store_dir), **settings}, "port": self.port}
        child_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
            ),
            "RAY_USAGE_STATS_ENABLED": "0",
            "HF_HUB_OFFLINE": "1",
            **env,
        }
        child_env.pop("MNEMORAY_SERVER__API_KEYS", None)  # keys only from ``settings``
        child_env.pop("RAY_ADDRESS", None)
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed by stop()/kill()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.serve_process", json.dumps(spec)],
            cwd=REPO,
            env=child_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout_s: float) -> float:
        return wait_healthy(self.proc, self.base, timeout_s, f"server (see {self.log_path})")

    def pids(self) -> list[int]:
        """The server's whole process tree (this child and every descendant)."""
        return tree_pids([self.proc.pid])

    def kill(self) -> int:
        """SIGKILL every process of the tree at once, as a power cut would; returns how many."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # stragglers started meanwhile
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log.close()
        return len(pids)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # run_local: serve.shutdown(), ray exits
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        self._log.close()


# -- the process tree from /proc ------------------------------------------------------------
class ProcRow(NamedTuple):
    ppid: int
    pgid: int  # process group
    state: str  # "R", "S", ..., "Z" (a zombie: dead, not yet reaped)
    cmd: str  # command line
    cpu: float  # seconds, user + system
    rss: int  # resident bytes


def proc_table() -> dict[int, ProcRow]:
    """Every process, from ``/proc``."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        out[int(d)] = ProcRow(
            int(rest[1]),
            int(rest[2]),
            rest[0],
            cmd,
            (int(rest[11]) + int(rest[12])) / CLK,
            int(rest[21]) * PAGE,
        )
    return out


def tree_pids(roots: list[int], table: dict[int, ProcRow] | None = None) -> list[int]:
    table = proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row.ppid, []).append(pid)
    out: list[int] = []
    stack = [r for r in roots if r in table]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def group_pids(pgid: int) -> set[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    return {pid for pid, row in proc_table().items() if row.pgid == pgid and row.state != "Z"}


def role(cmd: str) -> str:
    if "ProxyActor" in cmd:
        return "proxy"
    if "MemoryIngress" in cmd:
        return "replica"
    if "ServeController" in cmd:
        return "controller"
    if "ServeReplica" in cmd:
        return "other replicas"
    if "--_loadgen" in cmd:
        return "load generator"
    return "ray + other"


def tree_cpu(roots: list[int]) -> dict[str, float]:
    """CPU seconds by role over the process trees under ``roots`` (server, load generator)."""
    table = proc_table()
    out: dict[str, float] = {}
    for pid in tree_pids(roots, table):
        row = table[pid]
        out[role(row.cmd)] = out.get(role(row.cmd), 0.0) + row.cpu
    return out


def tree_rss(roots: list[int]) -> int:
    """Resident bytes of every process under ``roots``, summed."""
    table = proc_table()
    return sum(table[pid].rss for pid in tree_pids(roots, table))


if __name__ == "__main__":
    _server_main(json.loads(sys.argv[1]))
