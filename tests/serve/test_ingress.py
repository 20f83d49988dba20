"""Which ingress `mnemoray serve` uses, without Ray: direct by default (the replicas'
own HTTP servers, mnemoray.serve.replica_http), Serve's proxy when asked; and how
replicas share the one port."""

from __future__ import annotations

import asyncio
import contextlib
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
from mnemoray.http.connection_guard import ConnectionLimits
from mnemoray.serve.replica_http import INSTANCE_HEADER, ReplicaHttp, bind
from mnemoray.settings.serve import SettingsError, load_settings
from tests.support.raw_http import connect, drip_until_closed, status_of


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the setting ---------------------------------------------------------------------------
def test_the_default_ingress_is_direct_and_proxy_can_be_chosen(tmp_path: Path) -> None:
    store = str(tmp_path)
    assert load_settings({"store": store}, env={}).server.ingress == "direct"
    assert (
        load_settings({"store": store, "server.ingress": "proxy"}, env={}).server.ingress == "proxy"
    )
    assert (
        load_settings({"store": store}, env={"MNEMORAY_SERVER__INGRESS": "proxy"}).server.ingress
        == "proxy"
    )
    with pytest.raises(SettingsError) as bad:
        load_settings({"store": store, "server.ingress": "lb"}, env={})
    assert bad.value.field == "server.ingress"


def test_the_old_direct_ingress_setting_reads_as_the_ingress_it_asked_for(tmp_path: Path) -> None:
    store = str(tmp_path)
    assert (
        load_settings({"store": store, "server.direct_ingress": "true"}, env={}).server.ingress
        == "direct"
    )
    assert (
        load_settings(
            {"store": store}, env={"MNEMORAY_SERVER__DIRECT_INGRESS": "false"}
        ).server.ingress
        == "proxy"
    )
    with pytest.raises(SettingsError, match="deprecated"):
        load_settings(
            {"store": store, "server": {"direct_ingress": False, "ingress": "direct"}}, env={}
        )


# -- the CLI -------------------------------------------------------------------------------
@pytest.fixture
def started(monkeypatch) -> Iterator[list[Any]]:
    """`mnemoray serve` up to run_local, which records the settings it was given."""
    import mnemoray.serve.app as serve_app

    for name in (
        "MNEMORAY_CONFIG",
        "MNEMORAY_SERVER__API_KEYS",
        "MNEMORAY_SERVER__HOST",
        "MNEMORAY_SERVER__INGRESS",
        "MNEMORAY_SERVER__DIRECT_INGRESS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the CLI sets it; undone
    calls: list[Any] = []
    monkeypatch.setattr(serve_app, "run_local", lambda s, **kw: calls.append(s))
    yield calls


def _serve(args: list[str]) -> Any:
    from mnemoray.cli.main import app

    return CliRunner().invoke(app, ["serve", *args])


def test_cli_serve_uses_direct_ingress_unless_told_proxy(
    tmp_path: Path, started, monkeypatch
) -> None:
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
    serve_app.run_local({"store": str(tmp_path), "server.port": 8123, "server.ingress": "proxy"})
    assert started == [
        {"proxy_location": "Disabled"},
        {"http_options": {"host": "127.0.0.1", "port": 8123}},
    ]


# -- replicas on one port ---------------------------------------------------------------------
async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps({"status": "ok"}).encode()})


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _start(
    app: Any, loop: asyncio.AbstractEventLoop, limits: ConnectionLimits | None = None
) -> tuple[ReplicaHttp, int]:
    port = _free_port()

    async def start() -> ReplicaHttp:
        return ReplicaHttp(app, "127.0.0.1", port, instance="one", loop=loop, limits=limits)

    http = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
    return http, port


@pytest.fixture
def replica(loop_thread) -> Iterator[tuple[int, str]]:
    """One replica's server (instance "one") on its own loop and thread."""
    http, port = _start(_ok, loop_thread)
    yield port, "one"
    asyncio.run_coroutine_threadsafe(http.stop(10), loop_thread).result(20)


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


def test_a_replica_cuts_off_a_request_head_that_does_not_arrive(loop_thread) -> None:
    # The guard itself: tests/http/test_connection_guard.py.
    limits = ConnectionLimits(header_timeout_s=0.3, body_timeout_s=0.3, max_per_client=0)
    http, port = _start(_ok, loop_thread, limits)
    try:
        with connect(port) as sock:
            answer = drip_until_closed(sock, b"GET /healthz HTTP/1.1\r\n", 0.05, limit_s=2.0)
        assert status_of(answer) == 408
    finally:
        asyncio.run_coroutine_threadsafe(http.stop(10), loop_thread).result(20)


def test_a_port_held_by_another_server_is_refused() -> None:
    with socket.socket() as other:  # a listener that does not share (no SO_REUSEPORT)
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        port = other.getsockname()[1]
        with pytest.raises(ConfigError, match="in use by another server"):
            bind("127.0.0.1", port, instance="one")


# -- a deprecated direct_ingress in a lower layer ----------------------------------------------
def test_a_higher_layer_ingress_beats_a_file_direct_ingress(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"store": str(tmp_path), "server": {"direct_ingress": True}}))
    assert load_settings({"config": str(config)}, env={}).server.ingress == "direct"
    assert (
        load_settings({"config": str(config), "server.ingress": "proxy"}, env={}).server.ingress
        == "proxy"
    )
    assert (
        load_settings(
            {"config": str(config)}, env={"MNEMORAY_SERVER__INGRESS": "proxy"}
        ).server.ingress
        == "proxy"
    )
    # The environment's old key beats the file, a flag beats the environment's old key.
    assert (
        load_settings(
            {"config": str(config)}, env={"MNEMORAY_SERVER__DIRECT_INGRESS": "false"}
        ).server.ingress
        == "proxy"
    )
    assert (
        load_settings(
            {"config": str(config), "server.ingress": "direct"},
            env={"MNEMORAY_SERVER__DIRECT_INGRESS": "false"},
        ).server.ingress
        == "direct"
    )
    # Both keys in one layer, disagreeing: still an error, naming the old key.
    with pytest.raises(SettingsError, match="contradicts") as bad:
        load_settings(
            {"config": str(config)},
            env={"MNEMORAY_SERVER__DIRECT_INGRESS": "false", "MNEMORAY_SERVER__INGRESS": "direct"},
        )
    assert bad.value.field == "server.direct_ingress"


def test_cli_ingress_proxy_beats_a_config_file_direct_ingress(tmp_path: Path, started) -> None:
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"server": {"direct_ingress": True}}))
    result = _serve(["--store", str(tmp_path), "--config", str(config), "--ingress", "proxy"])
    assert result.exit_code == 0, result.output
    assert started[-1].server.ingress == "proxy"


# -- an old Serve config (its proxy on, no server.ingress) --------------------------------------
def test_build_app_tells_the_replicas_whether_the_ingress_was_chosen(tmp_path: Path) -> None:
    from mnemoray.serve.app import build_app

    def chosen(flags: dict[str, Any], env: dict[str, str] | None = None) -> bool:
        settings = load_settings(
            {
                "store": str(tmp_path),
                "models.embedder": "none",
                "models.summarizer_deployment": False,
                **flags,
            },
            env=env or {},
        )
        return build_app(settings)._bound_deployment._replica_config.init_kwargs["ingress_chosen"]

    assert chosen({}) is False
    assert chosen({"server.ingress": "direct"}) is True
    assert chosen({}, {"MNEMORAY_SERVER__INGRESS": "direct"}) is True
    assert chosen({"server.direct_ingress": "true"}) is True


def test_an_unchosen_ingress_yields_to_a_running_serve_proxy(caplog) -> None:
    from mnemoray.serve.ingress_mode import ingress_to_use

    with caplog.at_level("WARNING", logger="ray.serve"):
        assert ingress_to_use("direct", False, True) == "proxy"
    assert "server.ingress" in caplog.text
    assert ingress_to_use("direct", False, False) == "direct"
    assert ingress_to_use("direct", False, None) == "direct"  # Serve could not be asked
    assert ingress_to_use("direct", True, True) == "direct"  # chosen: kept (bind decides)
    assert ingress_to_use("proxy", False, False) == "proxy"


def test_whether_serve_runs_its_proxy_is_asked_of_the_controller(monkeypatch) -> None:
    import ray
    from ray.serve.config import ProxyLocation

    from mnemoray.serve.ingress_mode import serve_proxy_runs

    async def location(value: Any) -> Any:
        return value

    class Controller:
        def __init__(self, value: Any) -> None:
            self.get_proxy_location = type("M", (), {"remote": lambda _s: location(value)})()

    asked: list[tuple[str, str]] = []

    def get_actor(name: str, namespace: str) -> Controller:
        asked.append((name, namespace))
        return controller

    monkeypatch.setattr(ray, "get_actor", get_actor)
    controller = Controller(ProxyLocation.EveryNode)
    assert asyncio.run(serve_proxy_runs()) is True
    controller = Controller(ProxyLocation.HeadOnly)
    assert asyncio.run(serve_proxy_runs()) is True
    controller = Controller(ProxyLocation.Disabled)
    assert asyncio.run(serve_proxy_runs()) is False
    assert asked[0] == ("SERVE_CONTROLLER_ACTOR", "serve")

    def no_controller(name: str, namespace: str) -> Any:
        raise ValueError("Failed to look up actor")

    monkeypatch.setattr(ray, "get_actor", no_controller)
    assert asyncio.run(serve_proxy_runs()) is None


def test_the_port_in_use_error_names_the_setting_to_add() -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        with pytest.raises(ConfigError, match="server.ingress: proxy"):
            bind("127.0.0.1", other.getsockname()[1], instance="one")


# -- the sibling probe ------------------------------------------------------------------------
def test_a_sibling_that_answers_late_is_retried_not_refused(replica, monkeypatch) -> None:
    import mnemoray.serve.replica_http as rh

    port, instance = replica
    real, calls, pauses = rh._ask, [], []

    def slow_then_real(host: str, p: int) -> str | None:
        calls.append(p)
        if len(calls) <= 2:  # the sibling's loop is busy: the probe times out
            raise TimeoutError("timed out")
        return real(host, p)

    monkeypatch.setattr(rh, "_ask", slow_then_real)
    monkeypatch.setattr(rh.time, "sleep", pauses.append)
    bind("127.0.0.1", port, instance=instance).close()
    assert len(calls) == 3 and pauses == [0.1, 0.2]


def test_a_silent_port_is_probed_for_a_bounded_time_then_joined(monkeypatch) -> None:
    import urllib.error

    import mnemoray.serve.replica_http as rh

    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    def silent(host: str, port: int) -> str | None:
        raise urllib.error.URLError(TimeoutError("timed out"))

    monkeypatch.setattr(rh, "_ask", silent)
    monkeypatch.setattr(rh.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(rh.time, "sleep", sleep)
    assert rh._may_join("127.0.0.1", 1, "one") is True
    assert 0 < clock[0] <= rh.PROBE_PATIENCE_S


def test_an_answer_without_our_id_refuses_and_nobody_listening_joins(monkeypatch) -> None:
    import http.server

    import mnemoray.serve.replica_http as rh

    def no_sleep(seconds: float) -> None:
        raise AssertionError("an answer, or a refusal, needs no retry")

    monkeypatch.setattr(rh.time, "sleep", no_sleep)

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        assert rh._may_join("127.0.0.1", other.server_address[1], "one") is False
    finally:
        other.shutdown()
        other.server_close()
    assert rh._may_join("127.0.0.1", _free_port(), "one") is True  # refused: nobody


# -- shutdown ---------------------------------------------------------------------------------
def test_stop_returns_once_the_requests_in_flight_are_answered(loop_thread) -> None:
    entered, box, answered = threading.Event(), {}, []

    async def held(scope: dict[str, Any], receive: Any, send: Any) -> None:
        entered.set()
        while not box["http"].server.should_exit:  # answers only once shutdown began
            await asyncio.sleep(0.01)
        await _ok(scope, receive, send)
        answered.append(True)

    http, port = _start(held, loop_thread)
    box["http"] = http
    got: dict[str, Any] = {}

    def call() -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/x", timeout=30) as r:
            got["status"], got["body"] = r.status, json.loads(r.read())

    client = threading.Thread(target=call)
    client.start()
    assert entered.wait(10)
    asyncio.run_coroutine_threadsafe(http.stop(30), loop_thread).result(60)
    assert answered == [True] and http.task.done()  # answered before stop returned
    client.join(10)
    assert got == {"status": 200, "body": {"status": "ok"}}
    with socket.socket() as s:  # and it no longer listens
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_stop_cancels_what_is_still_open_after_its_timeout(loop_thread) -> None:
    entered, never = threading.Event(), asyncio.Event()

    async def stuck(scope: dict[str, Any], receive: Any, send: Any) -> None:
        entered.set()
        await never.wait()

    http, port = _start(stuck, loop_thread)

    def call() -> None:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/x", timeout=30).close()

    client = threading.Thread(target=call, daemon=True)
    client.start()
    assert entered.wait(10)
    asyncio.run_coroutine_threadsafe(http.stop(0), loop_thread).result(30)
    assert http.task.done() and http.server.force_exit


def test_the_ingress_destructor_awaits_the_server_within_serves_budget() -> None:
    from types import SimpleNamespace

    from mnemoray.serve.ingress import MemoryIngress
    from mnemoray.serve.ingress_mode import shutdown_budget_s

    stopped: list[float] = []

    class Http:
        async def stop(self, timeout_s: float) -> None:
            await asyncio.sleep(0)
            stopped.append(timeout_s)

    cls = MemoryIngress.func_or_class
    replica = cls.__new__(cls)
    replica.http = Http()
    asyncio.run(replica.__del__())
    assert stopped == [18.0]  # outside a replica: Serve's defaults, 20 s less the 2 s drain
    assert (
        shutdown_budget_s(
            SimpleNamespace(graceful_shutdown_timeout_s=60, graceful_shutdown_wait_loop_s=2)
        )
        == 58
    )
