"""Direct ingress (``server.ingress: direct``, the default): an ingress replica serves HTTP.

Why: through Serve's HTTP proxy every request crosses two processes (proxy, replica)
and the replica fetches a POST body from the proxy in a second call; on a small
machine that costs more CPU than the recall itself (benchmarks/README.md, "Serve").
Here each ``MemoryIngress`` replica runs the app's ASGI app in its own uvicorn server,
on its own event loop (where the index lives and query vectors arrive), bound to
``server.host:server.port``: one hop, one URL.

One node, one URL, any number of replicas (``server.replicas``, a Serve config's
``num_replicas`` or autoscaling): each replica binds the port with ``SO_REUSEPORT`` and
the kernel spreads new connections over them. A replica joins a port only when
whatever answers there is this same app (``INSTANCE_HEADER`` on ``/healthz``, an id
from the Ray cluster and the app name): a second server started on the same port
by the same OS user (Serve's own proxy included) is refused instead of silently
sharing its clients. A sibling too busy to answer is asked again (``_may_join``).

Stopping (``ReplicaHttp.stop``, awaited by the ingress's async ``__del__``) waits for
the requests in flight: Serve does not count them, and ends the process when
``__del__`` returns.

Slow clients are cut off here (``mnemoray.http.connection_guard``: read timeouts, a cap
on connections per client address); Serve's proxy has neither. Serve's proxy features
do not apply to this path either: its request queueing and
``max_ongoing_requests`` back-pressure, request-count autoscaling and its access
logs. Clusters behind a load balancer use ``server.ingress: proxy``
(docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import http.client
import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import uvicorn

from mnemoray.errors import ConfigError
from mnemoray.http.connection_guard import ConnectionLimits, connection_limits, guarded_protocol
from mnemoray.settings.serve_groups import ServerSettings

log = logging.getLogger("ray.serve")

INSTANCE_HEADER = "x-mnemoray-instance"
KEEP_ALIVE_S = 5  # uvicorn's default; clients that pool connections reuse them

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def instance_id(cluster: str, app_name: str) -> str:
    """The id every replica of one app on one Ray cluster shares (and no other)."""
    return hashlib.sha256(f"{cluster}\0{app_name}".encode()).hexdigest()[:16]


def with_instance_header(app: Asgi, instance: str) -> Asgi:
    """``app`` answering ``/healthz`` with ``INSTANCE_HEADER``: how a replica that
    starts later recognises the port's other listeners as its siblings."""
    header = (INSTANCE_HEADER.encode(), instance.encode())

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != "/healthz":
            await app(scope, receive, send)
            return

        async def send_tagged(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await app(scope, receive, send_tagged)

    return wrapped


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The replica's process belongs to Ray: its signals are Ray's, not uvicorn's.
        yield


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _probe_host(host: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


# A sibling answers the probe on its event loop, which may be busy (a burst of
# recalls, a batch encoding on the loop): no answer within PROBE_TIMEOUT_S is not
# "another server", so the probe retries with backoff for up to PROBE_PATIENCE_S.
# Patience is bounded (a replica's start-up should not hang) and safe to exhaust: a
# listener that does not share the port still makes bind() fail with EADDRINUSE.
PROBE_TIMEOUT_S = 2.0
PROBE_PATIENCE_S = 30.0
PROBE_BACKOFF_S = (0.1, 2.0)  # first pause, longest pause


def _ask(host: str, port: int) -> str | None:
    """``INSTANCE_HEADER`` of whatever answers ``/healthz`` at ``host:port`` (None: it
    answered without one). OSError: no answer (refused, reset, timed out)."""
    h = _probe_host(host)
    url = f"http://[{h}]:{port}/healthz" if ":" in h else f"http://{h}:{port}/healthz"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no HTTP_PROXY
    try:
        with direct.open(url, timeout=PROBE_TIMEOUT_S) as r:
            return r.headers.get(INSTANCE_HEADER)
    except urllib.error.HTTPError as exc:  # an answer all the same (e.g. a 404)
        return exc.headers.get(INSTANCE_HEADER)
    except http.client.HTTPException:  # it answered, but not in HTTP
        return None


def _may_join(host: str, port: int, instance: str) -> bool:
    """Whether a replica of ``instance`` may join ``host:port``'s listeners: False only
    when something there answered, without this app's id."""
    deadline = time.monotonic() + PROBE_PATIENCE_S
    pause, longest = PROBE_BACKOFF_S
    while True:
        try:
            return _ask(host, port) == instance
        except OSError as exc:
            if isinstance(getattr(exc, "reason", exc), ConnectionRefusedError):
                return True  # nobody listens any more: bind() decides
            if time.monotonic() + pause > deadline:
                log.warning(
                    "mnemoray: %s:%d accepts connections but did not answer "
                    "/healthz in %.0f s (%r); joining it (a server that does "
                    "not share the port makes the bind fail)",
                    host,
                    port,
                    PROBE_PATIENCE_S,
                    exc,
                )
                return True
            time.sleep(pause)
            pause = min(2 * pause, longest)


def port_in_use(host: str, port: int) -> ConfigError:
    """The error for a port that another server (not this app) holds, naming the fix."""
    return ConfigError(
        f"{host}:{port} is in use by another server. If it is Ray Serve's HTTP proxy "
        f"(a Serve config with proxy_location EveryNode/HeadOnly, or `serve run`), add "
        f"server.ingress: proxy to the app's settings (args.server.ingress in a Serve "
        f"config, MNEMORAY_SERVER__INGRESS=proxy, --ingress proxy); otherwise choose "
        f"another server.port",
        field="server.port",
    )


def bind(host: str, port: int, *, instance: str) -> socket.socket:
    """The listening socket (SO_REUSEPORT), joining only this app's other replicas."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
        busy = probe.connect_ex((_probe_host(host), port)) == 0
    if busy and not _may_join(host, port, instance):
        raise port_in_use(host, port)
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise port_in_use(host, port) from exc
        raise
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class ReplicaHttp:
    """One replica's HTTP server on ``loop`` (the replica's own)."""

    def __init__(
        self,
        app: Asgi,
        host: str,
        port: int,
        *,
        instance: str,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        # sock: bind()'s socket, when the caller bound it off the loop (the sibling
        # probe may wait for a busy sibling). limits: the server settings' defaults
        # unless given.
        self.sock = sock if sock is not None else bind(host, port, instance=instance)
        config = uvicorn.Config(
            with_instance_header(app, instance),
            lifespan="off",
            access_log=False,
            log_config=None,
            timeout_keep_alive=KEEP_ALIVE_S,
            http=guarded_protocol(limits or connection_limits(ServerSettings())),
            ws="none",  # no route upgrades; an upgraded connection would leave the guard
        )
        self.server = _Server(config)
        self.task = loop.create_task(self.server.serve(sockets=[self.sock]))
        self.task.add_done_callback(self._ended)
        log.info("mnemoray: direct ingress on %s:%d", host, port)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("mnemoray: the replica's HTTP server stopped: %r", task.exception())

    async def stop(self, timeout_s: float) -> None:
        """Stop accepting, let open connections finish their current request, and
        return when the server has stopped: the replica's process may end right after
        (Serve counts no direct request as ongoing, so it does not wait for them).
        After ``timeout_s`` the requests still open are cancelled."""
        self.server.should_exit = True
        # asyncio.wait: neither re-raises the server's error (_ended logged it) nor
        # cancels the server if this caller is cancelled.
        done, _ = await asyncio.wait({self.task}, timeout=timeout_s)
        if not done:
            log.warning(
                "mnemoray: requests still open after %.0f s of shutdown; cancelling them", timeout_s
            )
            self.server.force_exit = True
            for request in list(self.server.server_state.tasks):  # as uvicorn does on its
                request.cancel()  # own shutdown timeout
            self.task.cancel()
            await asyncio.wait({self.task})
