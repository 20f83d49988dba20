"""A Serve ingress replica whose construction fails late stops what it started (the
reloader, the job worker, the pools, its own HTTP server) and raises the failure.

The replica class is constructed in this process, without Ray: the class as written,
under the wrapper ``@serve.ingress`` puts around it; its only Ray-bound step (the
direct ingress's instance id, from the Ray runtime) is replaced by the same server on a
free port."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from mnemoray.http.app import build_api, http_config
from mnemoray.serve.ingress import MemoryIngress
from mnemoray.serve.replica_http import ReplicaHttp

# The class as written: Serve's ASGI wrapper subclasses it.
Replica: Any = next(c for c in MemoryIngress.func_or_class.__mro__ if "_construct" in vars(c))


def own_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("mnemoray")}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings(tmp_path: Path, ingress: str, port: int = 0) -> dict[str, Any]:
    return {
        "store": str(tmp_path / "store"),
        "models": {
            "embedder": "none",
            "embedder_deployment": False,
            "summarizer_deployment": False,
        },
        "server": {"ingress": ingress, "host": "127.0.0.1", "port": port or 8000},
    }


def late_failure(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("late failure")


def test_a_late_failure_stops_the_parts_and_raises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last step: the "ready" log line reads the store's stats.
    monkeypatch.setattr(Replica, "store_stats", late_failure)
    before = own_threads()
    replica = Replica.__new__(Replica)
    with pytest.raises(RuntimeError, match="late failure"):
        asyncio.run(Replica.__init__(replica, settings(tmp_path, "proxy")))
    parts = replica.parts
    assert parts.ingestion is not None and parts.memory is not None  # it got that far
    assert not own_threads() - before  # reloader, job worker, query encoder: stopped
    assert replica.io_pool._shutdown
    with pytest.raises(RuntimeError, match="is closed"):
        parts.sessions.list_sessions("app", "user")  # the session store is closed


def test_a_failure_after_the_http_server_started_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    servers: list[ReplicaHttp] = []

    async def direct_here(self: Any) -> ReplicaHttp:
        """_direct_ingress, with a fixed instance id instead of the Ray runtime's."""
        api = build_api(self, http_config(self.settings.server, self.keys, echo_request_id=True))
        servers.append(ReplicaHttp(api, "127.0.0.1", port, instance="test", loop=self.loop))
        return servers[-1]

    monkeypatch.setattr(Replica, "_direct_ingress", direct_here)
    monkeypatch.setattr(Replica, "store_stats", late_failure)
    before = own_threads()
    replica = Replica.__new__(Replica)
    with pytest.raises(RuntimeError, match="late failure"):
        asyncio.run(Replica.__init__(replica, settings(tmp_path, "direct", port)))
    assert [s.task.done() for s in servers] == [True]
    assert servers[0].sock.fileno() == -1  # the server closed its socket: the port is free
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert not own_threads() - before
