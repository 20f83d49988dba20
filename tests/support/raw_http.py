"""A uvicorn server on a thread of its own, and raw sockets that speak to it as
misbehaving clients do (a head a byte at a time, a body that stops)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


@contextlib.contextmanager
def served(app: Any, http: type[asyncio.Protocol]) -> Iterator[int]:
    """``app`` served by uvicorn with protocol class ``http`` on 127.0.0.1; yields the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    config = uvicorn.Config(app, http=http, ws="none", lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def read_all(sock: socket.socket, timeout: float = 3.0) -> bytes:
    """Everything the server sends until it closes (TimeoutError if it does not)."""
    sock.settimeout(timeout)
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def drip_until_closed(sock: socket.socket, data: bytes, every_s: float, limit_s: float) -> bytes:
    """Send ``data`` one byte each ``every_s`` until the server closes (within
    ``limit_s``, else TimeoutError); what it answered."""
    sock.settimeout(every_s)
    deadline = time.monotonic() + limit_s
    out, i = b"", 0
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if i < len(data):
                sock.sendall(data[i : i + 1])
                i += 1
            continue
        if not chunk:
            return out
        out += chunk
    raise TimeoutError(f"still open after {limit_s} s")


def status_of(answer: bytes) -> int:
    """The status code of a raw HTTP answer."""
    return int(answer.split(b" ", 2)[1])


async def echo_length(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body (on ``/late``, after a pause: an app that is behind), then
    answers 200 with its length."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/late":
        await asyncio.sleep(0.6)
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})
