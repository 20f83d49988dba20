"""Read timeouts and a per-address connection cap for the uvicorn servers mnemoray runs
(each replica's direct ingress under ``mnemoray serve``, ``mnemoray ui``).

uvicorn bounds only the idle time between two requests (keep-alive): a client that
sends its request head a byte at a time, or a head and then never its body, or
connects and sends nothing, holds its connection for as long as it likes, and enough
such sockets, from one address and without a key, use up the process's file
descriptors. :func:`guarded_protocol` wraps uvicorn's own HTTP protocol (httptools,
else h11, as uvicorn picks) with:

- a header timeout: a request's head (request line and headers) must have arrived
  ``header_timeout_s`` after the connection was accepted, or after the first byte of
  a later request on a kept-alive connection;
- a body timeout: while a request body is read, at most ``body_timeout_s`` between two
  reads (not while the server itself has paused reading because the app is behind);
  a slow but steady upload is not cut, a stalled one is;
- at most ``max_per_client`` open connections per client address, loopback included;
  one more is answered 503 and closed at once (0: no cap).

An expired timeout answers 408 when part of a request had arrived and nothing of its
answer was sent, else closes silently: an idle pooled connection that the client is
about to reuse must not read an unasked 408 as the answer to its next request.
Both answers carry the API's error body (``mnemoray.http.errors.error_body``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from mnemoray.http.errors import error_body
from mnemoray.settings.serve_groups import ServerSettings

log = logging.getLogger(__name__)

TOO_MANY = "too many open connections from this address; close some and retry"
HEAD_TIMEOUT = "the request head did not arrive in time"
BODY_TIMEOUT = "the request body stalled"


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    body_timeout_s: float
    max_per_client: int  # 0: no cap


def connection_limits(server: ServerSettings) -> ConnectionLimits:
    """The limits the ``server`` settings group asks for."""
    return ConnectionLimits(
        header_timeout_s=server.header_timeout_s,
        body_timeout_s=server.body_timeout_s,
        max_per_client=server.max_connections_per_client,
    )


def _answer(status: int, reason: bytes, message: str, extra: bytes = b"") -> bytes:
    """A whole response that closes the connection (written before any of the app's)."""
    body = json.dumps(error_body(status, message, None, None)).encode()
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"%sconnection: close\r\n\r\n%s" % (status, reason, len(body), extra, body)
    )


REFUSED = _answer(503, b"Service Unavailable", TOO_MANY, b"retry-after: 1\r\n")
HEAD_408 = _answer(408, b"Request Timeout", HEAD_TIMEOUT)
BODY_408 = _answer(408, b"Request Timeout", BODY_TIMEOUT)


class PeerCounts:
    """Open connections per client address, for one server (its protocol class)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.open: dict[str, int] = {}

    def admit(self, peer: str) -> bool:
        if not self.cap:
            return True  # no cap: nothing to count (release finds nothing to take back)
        n = self.open.get(peer, 0)
        if n >= self.cap:
            return False
        self.open[peer] = n + 1
        return True

    def release(self, peer: str) -> None:
        n = self.open.pop(peer, 0) - 1
        if n > 0:
            self.open[peer] = n


def _peer(transport: asyncio.BaseTransport) -> str | None:
    info = transport.get_extra_info("peername")
    # A Unix socket's peer has no address: there is no client to count.
    return str(info[0]) if isinstance(info, tuple) and info else None


class GuardedHttp(asyncio.Protocol):
    """uvicorn's HTTP protocol for one connection, inside the timeouts and the cap.

    Wraps rather than subclasses: what it watches of the inner protocol is its current
    request cycle (``cycle``: ``more_body``, ``response_started``, ``response_complete``,
    the same in uvicorn's httptools and h11 protocols), and a refused connection never
    builds a parser. :func:`guarded_protocol` makes one subclass per server, holding
    that server's limits and counts."""

    limits: ClassVar[ConnectionLimits]
    peers: ClassVar[PeerCounts]
    inner_class: ClassVar[type[asyncio.Protocol]]

    def __init__(
        self,
        config: Any,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.args = (config, server_state, app_state, _loop)
        self.loop = _loop or asyncio.get_event_loop()
        self.inner: Any = None  # built once the connection is admitted
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_kind = "head"  # what the timer times: "head" or "body"
        self.seen_cycle: Any = None  # the inner protocol's last request cycle seen
        self.head_started = False  # bytes of a request head arrived since the last answer

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is one without subclassing asyncio.Transport).
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = _peer(transport)
        if peer is not None and not self.peers.admit(peer):
            log.debug("mnemoray: refused a connection from %s: %s", peer, TOO_MANY)
            transport.write(REFUSED)
            transport.close()
            return
        self.peer = peer
        config, server_state, app_state, loop = self.args
        self.inner = self.inner_class(  # type: ignore[call-arg]
            config=config, server_state=server_state, app_state=app_state, _loop=loop
        )
        self.inner.connection_made(transport)
        self._arm("head")

    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            return  # refused: what it sends is dropped with the connection
        seen = self.seen_cycle
        was_body = _open(seen) and seen.more_body
        self.inner.data_received(data)
        if self.transport is None or self.transport.is_closing():
            return
        cycle = self.inner.cycle
        if cycle is not seen:
            self._adopt(cycle)
        elif _open(cycle):
            if cycle.more_body:  # the body is being read: time the gap to the next read
                self._arm("body")
            elif was_body:  # the body is complete: the app answers, untimed
                self._cancel()
            else:  # a pipelined request's head, read while the app answers
                self.head_started = True
                self._keep("head")
        else:  # no request open: these bytes begin (or continue) the next head
            self.head_started = True
            self._keep("head")

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self.inner is None:
            return
        if self.peer is not None:
            self.peers.release(self.peer)
            self.peer = None
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    # -- the timer ---------------------------------------------------------------------------
    def _adopt(self, cycle: Any) -> None:
        """A request's head is complete (in a read, or with h11 after an answer, from
        what it had buffered): time its body, if one is still to come."""
        self.seen_cycle = cycle
        self.head_started = False
        if _open(cycle) and cycle.more_body:
            self._arm("body")
        else:
            self._cancel()

    def _arm(self, kind: str) -> None:
        self._cancel()
        delay = self.limits.header_timeout_s if kind == "head" else self.limits.body_timeout_s
        self.timer_kind = kind
        self.timer = self.loop.call_later(delay, self._expired)

    def _keep(self, kind: str) -> None:
        """Arm ``kind`` unless it already runs: a head's deadline is not moved by its bytes."""
        if self.timer is None or self.timer_kind != kind:
            self._arm(kind)

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        cycle = self.inner.cycle
        if cycle is not self.seen_cycle:
            self._adopt(cycle)
        elif _open(cycle) and cycle.more_body:
            if not transport.is_reading():  # paused by the server, not stalled by the client
                self._arm("body")
                return
            if not cycle.response_started:
                transport.write(BODY_408)
            transport.close()
        elif _open(cycle):  # a pipelined head waits for the answer before it
            self._arm("head")
        elif self.timer_kind == "head":
            if self.head_started:
                transport.write(HEAD_408)
            transport.close()
        # else: a body timer after the answer; uvicorn's keep-alive timeout takes over


def _open(cycle: Any) -> bool:
    """Whether ``cycle`` (a uvicorn request cycle, or None) is a request not yet answered."""
    return cycle is not None and not cycle.response_complete


def _default_inner() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol


def guarded_protocol(
    limits: ConnectionLimits, inner: type[asyncio.Protocol] | None = None
) -> type[asyncio.Protocol]:
    """The protocol class for one uvicorn server (``uvicorn.Config(http=...)``): each
    server gets its own, so the per-address counts are that server's. ``inner``:
    uvicorn's HTTP protocol to wrap (default: the one uvicorn picks, httptools if
    installed, else h11)."""
    attrs = {
        "limits": limits,
        "peers": PeerCounts(limits.max_per_client),
        "inner_class": inner or _default_inner(),
    }
    return type("GuardedHttp", (GuardedHttp,), attrs)


__all__ = [
    "ConnectionLimits",
    "GuardedHttp",
    "PeerCounts",
    "connection_limits",
    "guarded_protocol",
]
