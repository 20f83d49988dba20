"""Which ingress `mnemoray serve` uses, without Ray: direct by default (the replicas'
own HTTP servers, mnemoray.serve.replica_http), Serve's proxy when asked; and how
replicas share the one port."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mnemoray.errors import ConfigError
from mnemoray.serve.replica_http import INSTANCE_HEADER, ReplicaHttp, bind
from mnemoray.serve.settings import SettingsError, load_settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the setting ---------------------------------------------------------------------------
def test_the_default_ingress_is_direct_and_proxy_can_be_chosen(tmp_path: Path) -> None:
    store = str(tmp_path)
    assert load_settings({"store": store}, env={}).server.ingress == "direct"
    assert load_settings({"store": store, "server.ingress": "proxy"},
                         env={}).server.ingress == "proxy"
    assert load_settings({"store": store}, env={"MNEMORAY_SERVER__INGRESS": "proxy"}
                         ).server.ingress == "proxy"
    with pytest.raises(SettingsError) as bad:
        load_settings({"store": store, "server.ingress": "lb"}, env={})
    assert bad.value.field == "server.ingress"


def test_the_old_direct_ingress_setting_reads_as_the_ingress_it_asked_for(
        tmp_path: Path) -> None:
    store = str(tmp_path)
    assert load_settings({"store": store, "server.direct_ingress": "true"},
                         env={}).server.ingress == "direct"
    assert load_settings({"store": store}, env={"MNEMORAY_SERVER__DIRECT_INGRESS": "false"}
                         ).server.ingress == "proxy"
    with pytest.raises(SettingsError, match="deprecated"):
        load_settings({"store": store, "server": {"direct_ingress": False,
                                                  "ingress": "direct"}}, env={})


# -- the CLI -------------------------------------------------------------------------------
@pytest.fixture
def started(monkeypatch) -> Iterator[list[Any]]:
    """`mnemoray serve` up to run_local, which records the settings it was given."""
    import mnemoray.serve.app as serve_app

    for name in ("MNEMORAY_CONFIG", "MNEMORAY_SERVER__API_KEYS", "MNEMORAY_SERVER__HOST",
                 "MNEMORAY_SERVER__INGRESS", "MNEMORAY_SERVER__DIRECT_INGRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the CLI sets it; undone
    calls: list[Any] = []
    monkeypatch.setattr(serve_app, "run_local", lambda s, **kw: calls.append(s))
    yield calls


def _serve(args: list[str]) -> Any:
    from mnemoray.cli.main import app

    return CliRunner().invoke(app, ["serve", *args])


def test_cli_serve_uses_direct_ingress_unless_told_proxy(tmp_path: Path, started,
                                                         monkeypatch) -> None:
    result = _serve(["--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert started[-1].server.ingress == "direct"
    assert "ingress direct: 1 replica(s) answer on this port" in result.output
    result = _serve(["--store", str(tmp_path), "--ingress", "proxy"])
    assert result.exit_code == 0, result.output
    assert started[-1].server.ingress == "proxy"
    assert "Ray Serve's HTTP proxy answers on this port" in result.output
    monkeypatch.setenv("MNEMORAY_SERVER__INGRESS", "proxy")
    assert _serve(["--store", str(tmp_path)]).exit_code == 0
    assert started[-1].server.ingress == "proxy"
    # The old flag asks for what is now the default; with --ingress proxy it contradicts.
    result = _serve(["--store", str(tmp_path), "--direct-ingress"])
    assert result.exit_code == 0 and started[-1].server.ingress == "direct"
    assert "--direct-ingress is the default now" in result.output
    result = _serve(["--store", str(tmp_path), "--direct-ingress", "--ingress", "proxy"])
    assert result.exit_code == 2 and len(started) == 4


def test_run_local_starts_no_proxy_for_direct_ingress(tmp_path: Path, monkeypatch) -> None:
    import ray
    from ray import serve

    import mnemoray.serve.app as serve_app

    started: list[dict[str, Any]] = []

    def stop(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(serve, "start", lambda **kw: started.append(kw))
    monkeypatch.setattr(serve, "run", lambda *a, **kw: None)
    monkeypatch.setattr(serve, "shutdown", lambda: None)
    monkeypatch.setattr(serve_app, "build_app", lambda s: None)
    monkeypatch.setattr(serve_app.signal, "signal", lambda *a: None)
    monkeypatch.setattr(serve_app.time, "sleep", stop)
    serve_app.run_local({"store": str(tmp_path), "server.port": 8123})
    serve_app.run_local({"store": str(tmp_path), "server.port": 8123,
                         "server.ingress": "proxy"})
    assert started == [{"proxy_location": "Disabled"},
                       {"http_options": {"host": "127.0.0.1", "port": 8123}}]


# -- replicas on one port ---------------------------------------------------------------------
async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps({"status": "ok"}).encode()})


@pytest.fixture
def replica() -> Iterator[tuple[int, str]]:
    """One replica's server (instance "one") on its own loop and thread."""
    port, loop = _free_port(), asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, ReplicaHttp] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        box["http"] = ReplicaHttp(_ok, "127.0.0.1", port, instance="one", loop=loop)
        loop.call_soon(ready.set)
        loop.run_until_complete(box["http"].task)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    for _ in range(100):  # uvicorn's startup is a few loop turns
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
    yield port, "one"
    loop.call_soon_threadsafe(box["http"].stop)
    thread.join(10)


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.headers


def test_replicas_of_one_app_share_the_port_and_nobody_else_joins(replica) -> None:
    port, instance = replica
    assert _get(port, "/healthz").get(INSTANCE_HEADER) == instance
    assert _get(port, "/v1/other").get(INSTANCE_HEADER) is None  # only on /healthz
    sibling = bind("127.0.0.1", port, instance=instance)
    sibling.close()
    with pytest.raises(ConfigError) as other:  # another app (or server) on the port
        bind("127.0.0.1", port, instance="two")
    assert other.value.field == "server.port"


def test_a_port_held_by_another_server_is_refused() -> None:
    with socket.socket() as other:  # a listener that does not share (no SO_REUSEPORT)
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        port = other.getsockname()[1]
        with pytest.raises(ConfigError, match="in use by another server"):
            bind("127.0.0.1", port, instance="one")
