"""Direct ingress (``server.ingress: direct``, the default): an ingress replica serves HTTP.

Why: through Serve's HTTP proxy every request crosses two processes (proxy, replica)
and the replica fetches a POST body from the proxy in a second call; on a small
machine that costs more CPU than the recall itself (benchmarks/README.md, "Serve").
Here each ``MemoryIngress`` replica runs the app's ASGI app in its own uvicorn server,
on its own event loop (where the micro-batcher and the index live), bound to
``server.host:server.port``: one hop, one URL.

One node, one URL, any number of replicas (``server.replicas``, a Serve config's
``num_replicas`` or autoscaling): each replica binds the port with ``SO_REUSEPORT`` and
the kernel spreads new connections over them. A replica joins a port only when
whatever answers there is this same app (``INSTANCE_HEADER`` on ``/healthz``, an id
from the Ray cluster and the app name): a second server started on the same port
by the same OS user (Serve's own proxy included) is refused instead of silently
sharing its clients.

Serve's proxy features do not apply to this path: its request queueing and
``max_ongoing_requests`` back-pressure, request-count autoscaling and its access
logs. Clusters behind a load balancer use ``server.ingress: proxy``
(docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import socket
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn

from mnemoray.errors import ConfigError

log = logging.getLogger("ray.serve")

INSTANCE_HEADER = "x-mnemoray-instance"
KEEP_ALIVE_S = 5  # uvicorn's default; clients that pool connections reuse them

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
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

        async def send_tagged(message: dict[str, Any]) -> None:
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


def _listener_instance(host: str, port: int) -> str | None:
    """The instance id of the app answering ``host:port``; None: nothing, or not ours."""
    h = _probe_host(host)
    url = f"http://[{h}]:{port}/healthz" if ":" in h else f"http://{h}:{port}/healthz"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no HTTP_PROXY
    try:
        with direct.open(url, timeout=2) as r:
            return r.headers.get(INSTANCE_HEADER)
    except OSError:
        return None


def bind(host: str, port: int, *, instance: str) -> socket.socket:
    """The listening socket (SO_REUSEPORT), joining only this app's other replicas."""
    taken = ConfigError(
        f"{host}:{port} is in use by another server; choose server.port, or "
        f"server.ingress: proxy if Serve's HTTP proxy is meant to listen there",
        field="server.port")
    with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
        busy = probe.connect_ex((_probe_host(host), port)) == 0
    if busy and _listener_instance(host, port) != instance:
        raise taken
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise taken from exc
        raise
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class ReplicaHttp:
    """One replica's HTTP server on ``loop`` (the replica's own)."""

    def __init__(self, app: Asgi, host: str, port: int, *, instance: str,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.sock = bind(host, port, instance=instance)
        config = uvicorn.Config(with_instance_header(app, instance), lifespan="off",
                                access_log=False, log_config=None,
                                timeout_keep_alive=KEEP_ALIVE_S)
        self.server = _Server(config)
        self.task = loop.create_task(self.server.serve(sockets=[self.sock]))
        self.task.add_done_callback(self._ended)
        log.info("mnemoray: direct ingress on %s:%d", host, port)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("mnemoray: the replica's HTTP server stopped: %r", task.exception())

    def stop(self) -> None:
        """Stop accepting; open connections finish their current request."""
        self.server.should_exit = True
