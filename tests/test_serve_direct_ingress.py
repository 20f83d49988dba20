"""`mnemoray serve --direct-ingress`: the replica answers HTTP on its own port.

Ray Serve reads its throughput preset when its modules load, in every Ray process,
so this needs a Ray instance started with it: the test runs the real CLI in a
subprocess (its own local Ray), as a user would, and talks to it over HTTP.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def _free_port_pair() -> int:
    """A port P with P and P+1 free (proxy, first replica)."""
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


def _non_loopback_ip() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: picks the route's source
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_direct_ingress_serves_recall_on_the_replica_port(tmp_path: Path) -> None:
    port = _free_port_pair()
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "MNEMORAY_API_KEYS", "MNEMORAY_SERVER__API_KEYS")}
    env.update(HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemoray.cli", "serve", "--store", str(tmp_path / "store"),
         "--port", str(port), "--direct-ingress"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        urls: list[str] = []
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                pytest.fail("server exited:\n" + "".join(lines[-40:]))
            lines.append(line)
            m = re.search(r"direct ingress, replicas answer at (.+)$", line)
            if m:
                urls = re.findall(r"http://[\d.]+:\d+", m.group(1))
                break
        assert urls, "no replica URL printed:\n" + "".join(lines[-40:])
        replica = urls[0]
        assert replica == f"http://127.0.0.1:{port + 1}"

        with httpx.Client(base_url=replica, timeout=30) as c:
            r = c.post("/v1/memories", json={
                "app_name": "app", "user_id": "alice",
                "memories": [{"text": "Alice adopted an African Grey parrot named Kiwi."},
                             {"text": "Alice roasts chicken at 220C for crispy skin."}]})
            assert r.status_code == 201 and r.json()["added"] == 2, r.text
            hits: list = []
            for _ in range(20):  # visible within a second (reload interval)
                r = c.post("/v1/recall", json={"app_name": "app", "user_id": "alice",
                                               "query": "that flying animal", "top_k": 1})
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
            r = c.post("/v1/recall", json={"app_name": "app", "user_id": "bob",
                                           "query": "parrot"})
            assert r.status_code == 200 and r.json()["memories"] == []
        # The proxy still answers on PORT, with the same data.
        r = httpx.post(f"http://127.0.0.1:{port}/v1/recall", timeout=30,
                       json={"app_name": "app", "user_id": "alice", "query": "parrot"})
        assert r.status_code == 200 and r.json()["memories"]
        # No API keys: the replica's own server is bound to loopback only, too.
        ip = _non_loopback_ip()
        if ip is not None:
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((ip, port + 1)) != 0
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
