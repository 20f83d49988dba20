"""`mnemoray serve` as a user starts it: direct ingress, the replicas answer on PORT.

The default path (``server.ingress: direct``, mnemoray.serve.replica_http): every
ingress replica serves HTTP itself on the one port (two replicas share it), no
Serve proxy in front. The test runs the real CLI in a subprocess (its own local
Ray), as a user would, and talks to it over HTTP.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.sockets import (
    HAS_PROC_NET,
    is_loopback,
    listening,
    port_of,
    process_tree,
    refuses_without_token,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _free_port_pair() -> int:
    """A port P with P and P+1 free."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port > 65000:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair")


def _listeners(port: int) -> int:
    """Sockets listening on ``port`` (IPv4, from /proc/net/tcp; state 0A = LISTEN)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(
        1 for row in rows if row.split()[1].endswith(f":{port:04X}") and row.split()[3] == "0A"
    )


def _non_loopback_ip() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: picks the route's source
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_default_serve_answers_on_its_port_from_every_replica(tmp_path: Path) -> None:
    port = _free_port_pair()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RAY_ADDRESS", "MNEMORAY_API_KEYS", "MNEMORAY_SERVER__API_KEYS")
        and not k.startswith("MNEMORAY_SERVER__")
    }
    env.update(HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mnemoray.cli",
            "serve",
            "--store",
            str(tmp_path / "store"),
            "--port",
            str(port),
            "--replicas",
            "2",
            "--set",
            "server.num_cpus.ingress=0.1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                pytest.fail("server exited:\n" + "".join(lines[-40:]))
            lines.append(line)
            if "ingress direct: 2 replica(s) answer on this port" in line:
                break
        else:
            pytest.fail("no ingress line:\n" + "".join(lines[-40:]))
        replica = f"http://127.0.0.1:{port}"
        for _ in range(240):  # the CLI prints before Serve has started the replicas
            if _listeners(port) == 2:
                break
            time.sleep(0.5)
        # One URL: both replicas listen on it (the kernel spreads connections); no
        # proxy and no per-replica port beside it.
        assert _listeners(port) == 2 and _listeners(port + 1) == 0
        if HAS_PROC_NET:
            # Nothing of the whole process tree listens beyond loopback but the
            # replicas' inter-deployment gRPC servers (Ray Serve binds them to [::]),
            # and each of those refuses a call without this instance's Ray token.
            held = listening(process_tree(proc.pid))
            assert len(held) >= 5, held  # GCS, raylet, workers, the replicas' port
            exposed = [a for a in held if not is_loopback(a)]
            assert exposed, "Ray Serve moved its replicas' gRPC servers: recheck Exposure"
            assert [a for a in exposed if not refuses_without_token(port_of(a))] == []

        with httpx.Client(base_url=replica, timeout=30) as c:
            r = c.post(
                "/v1/memories",
                json={
                    "app_name": "app",
                    "user_id": "alice",
                    "memories": [
                        {"text": "Alice adopted an African Grey parrot named Kiwi."},
                        {"text": "Alice roasts chicken at 220C for crispy skin."},
                    ],
                },
            )
            assert r.status_code == 201 and r.json()["added"] == 2, r.text
            hits: list = []
            for _ in range(40):  # visible to this replica within a second (reload)
                r = c.post(
                    "/v1/recall",
                    json={
                        "app_name": "app",
                        "user_id": "alice",
                        "query": "that flying animal",
                        "top_k": 1,
                    },
                )
                assert r.status_code == 200, r.text
                hits = r.json()["memories"]
                if hits:
                    break
                time.sleep(0.1)
            assert hits and "parrot" in hits[0]["text"]
            # Bad input is still a 4xx on the direct path.
            r = c.post("/v1/recall", json={"app_name": "app", "user_id": "alice"})
            assert r.status_code == 422 and "query" in r.text
            # Another tenant sees nothing.
            r = c.post("/v1/recall", json={"app_name": "app", "user_id": "bob", "query": "parrot"})
            assert r.status_code == 200 and r.json()["memories"] == []
        # Any new connection (either replica) sees the same data (the other replica
        # reloads the store within its reload interval, 0.25 s) and answers /healthz.
        time.sleep(1.5)
        for _ in range(6):
            with httpx.Client(base_url=replica, timeout=30) as c:
                r = c.post(
                    "/v1/recall", json={"app_name": "app", "user_id": "alice", "query": "parrot"}
                )
                assert r.status_code == 200 and r.json()["memories"], r.text
                assert r.headers.get("x-request-id")
                assert c.get("/healthz").json() == {"status": "ok"}
        metrics = httpx.get(replica + "/metrics", timeout=30)
        assert metrics.status_code == 200 and "mnemoray_http_requests_total" in metrics.text
        # No API keys: the replica's own server is bound to loopback only, too.
        ip = _non_loopback_ip()
        if ip is not None:
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((ip, port)) != 0
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
