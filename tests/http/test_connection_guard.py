"""The read timeouts and the per-address cap (mnemoray.http.connection_guard), against a
real uvicorn server on 127.0.0.1 with small limits. What depends on how uvicorn parses
(a head, a body) runs over both of its HTTP parsers (httptools, h11)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mnemoray.http.connection_guard import ConnectionLimits, connection_limits, guarded_protocol
from mnemoray.settings.serve_groups import ServerSettings
from tests.support.raw_http import (
    connect,
    drip_until_closed,
    echo_length,
    read_all,
    served,
    status_of,
)

TIMEOUT_S = 0.3
LIMITS = ConnectionLimits(header_timeout_s=TIMEOUT_S, body_timeout_s=TIMEOUT_S, max_per_client=0)
HEAD = b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n"


@pytest.fixture(scope="module", params=[HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    with served(echo_length, guarded_protocol(LIMITS, inner=request.param)) as p:
        yield p


@pytest.fixture(scope="module")
def any_port() -> Iterator[int]:
    """The parser uvicorn picks (httptools where installed)."""
    with served(echo_length, guarded_protocol(LIMITS)) as p:
        yield p


def _error(answer: bytes) -> dict[str, object]:
    return json.loads(answer.partition(b"\r\n\r\n")[2])["error"]


def test_a_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout(port: int) -> None:
    # A byte every 0.05 s never lets the head finish, and does not move its deadline.
    started = time.monotonic()
    with connect(port) as sock:
        answer = drip_until_closed(sock, HEAD % 0 + b"X" * 100, every_s=0.05, limit_s=2.0)
    assert time.monotonic() - started < 1.5
    assert status_of(answer) == 408
    assert _error(answer)["message"] == "the request head did not arrive in time"


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(port: int) -> None:
    with connect(port) as sock:
        assert read_all(sock) == b""  # an idle pooled connection must not read a 408


def test_a_body_that_stalls_is_cut_at_the_body_timeout(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(HEAD % 100 + b"x" * 10)
        answer = read_all(sock)
    assert status_of(answer) == 408
    assert _error(answer)["message"] == "the request body stalled"


def test_a_slow_but_steady_body_is_read_to_the_end(any_port: int) -> None:
    # Six pieces 0.1 s apart: twice the body timeout in all, never a gap as long.
    with connect(any_port) as sock:
        sock.sendall(HEAD % 6)
        for _ in range(6):
            time.sleep(0.1)
            sock.sendall(b"x")
        sock.settimeout(3)
        answer = sock.recv(65536)
    assert status_of(answer) == 200
    assert answer.endswith(b"\r\n\r\n6")


def test_a_body_the_app_reads_late_is_not_counted_against_the_client(any_port: int) -> None:
    # 1 MiB sent at once: uvicorn stops reading past its buffer while the app (at /late)
    # waits longer than the body timeout before it reads.
    body = b"y" * (1 << 20)
    conn = http.client.HTTPConnection("127.0.0.1", any_port, timeout=5)
    conn.request("POST", "/late", body=body)
    answer = conn.getresponse()
    assert (answer.status, answer.read()) == (200, str(len(body)).encode())
    conn.close()


def test_requests_on_a_kept_alive_connection_are_served(any_port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", any_port, timeout=5)
    for n in (0, 3, 70_000):
        conn.request("POST", "/echo", body=b"z" * n)
        answer = conn.getresponse()
        assert (answer.status, answer.read()) == (200, str(n).encode())
    time.sleep(TIMEOUT_S + 0.1)  # idle between requests: keep-alive's, not the head's
    conn.request("POST", "/echo", body=b"abc")
    assert conn.getresponse().read() == b"3"
    conn.close()


def test_one_connection_over_the_cap_is_refused_and_the_others_still_work() -> None:
    cap = 3
    limits = ConnectionLimits(header_timeout_s=10, body_timeout_s=10, max_per_client=cap)
    protocol = guarded_protocol(limits)
    with served(echo_length, protocol) as port:
        held = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(cap)]
        for conn in held:
            conn.connect()
        with connect(port) as extra:
            answer = read_all(extra)
        assert status_of(answer) == 503
        assert b"retry-after: 1\r\n" in answer
        assert "too many open connections" in str(_error(answer)["message"])
        for conn in held:
            conn.request("POST", "/echo", body=b"ok")
            assert conn.getresponse().read() == b"2"
        held.pop().close()  # a closed connection frees its place
        deadline = time.monotonic() + 5
        while protocol.peers.open.get("127.0.0.1") != cap - 1:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        again = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        again.request("POST", "/echo", body=b"back")
        assert again.getresponse().read() == b"4"
        for conn in [*held, again]:
            conn.close()


def test_each_server_counts_its_own_connections() -> None:
    one, two = (guarded_protocol(LIMITS) for _ in range(2))
    assert one.peers is not two.peers  # type: ignore[attr-defined]


def test_a_later_head_sent_slowly_on_a_kept_alive_connection_is_cut(any_port: int) -> None:
    with connect(any_port) as sock:
        sock.sendall(HEAD % 2 + b"ok")
        sock.settimeout(3)
        assert status_of(sock.recv(65536)) == 200
        answer = drip_until_closed(sock, HEAD % 0, every_s=0.05, limit_s=2.0)
    assert status_of(answer) == 408


def test_the_limits_come_from_the_server_settings() -> None:
    server = ServerSettings(header_timeout_s=1.5, body_timeout_s=4, max_connections_per_client=0)
    assert connection_limits(server) == ConnectionLimits(1.5, 4.0, 0)
