"""The client's retries against a tiny real ASGI app that fails a given number of times
(through Starlette's TestClient as the client's httpx.Client), and the backoff itself."""

from __future__ import annotations

import socket
import time
from email.utils import formatdate

import httpx
import pytest
from fastapi.testclient import TestClient

from mnemoray.client import MnemorayClient, RateLimitedAPIError, RetryPolicy, UnavailableAPIError
from mnemoray.client.retry import parse_retry_after
from mnemoray.errors import NotFound, Unavailable
from mnemoray.schemas.memories import RecallResponse
from tests.support.client_fixtures import KEY, Flaky

FAST = RetryPolicy(attempts=3, backoff_s=0.001, max_backoff_s=0.01)


def flaky_client(app: Flaky, retry: RetryPolicy = FAST) -> MnemorayClient:
    return MnemorayClient(api_key=KEY, http=TestClient(app), retry=retry)


def test_a_safe_call_is_retried_until_it_answers() -> None:
    app = Flaky(fails=2, status=503)
    with flaky_client(app) as mr:
        out = mr.recall("app", "ana", "q")
    assert isinstance(out, RecallResponse) and out.store_version == 3
    assert app.calls == [("POST", "/v1/recall")] * 3


def test_retry_after_is_honoured_and_a_long_one_is_the_callers() -> None:
    app = Flaky(fails=1, status=429, retry_after="0.2")
    start = time.monotonic()
    with flaky_client(app) as mr:
        assert mr.search("app", "ana", "q").memories == []
    assert time.monotonic() - start >= 0.2 and len(app.calls) == 2

    slow = Flaky(fails=1, status=429, retry_after="120")
    with flaky_client(slow) as mr, pytest.raises(RateLimitedAPIError) as err:
        mr.get_job("app", "ana", "j1")
    assert err.value.retry_after == 120 and isinstance(err.value, Unavailable)
    assert len(slow.calls) == 1


def test_retries_stop_after_the_policys_attempts() -> None:
    app = Flaky(fails=10, status=503)
    with flaky_client(app) as mr, pytest.raises(UnavailableAPIError) as err:
        mr.list_memories("app", "ana")
    assert len(app.calls) == FAST.attempts and err.value.request_id == "r3"


@pytest.mark.parametrize(
    "call",
    [
        lambda mr: mr.end_session("app", "ana", "s1"),
        lambda mr: mr.edit_memory("app", "ana", "m1", "new text"),
        lambda mr: mr.put_artifact("app", "ana", "s1", "a.txt", "v"),
        lambda mr: mr.append_events("app", "ana", "s1", [{"role": "user", "text": "hi"}]),
        lambda mr: mr.create_session("app", "ana"),
        lambda mr: mr.add_session(
            {"app_name": "app", "user_id": "ana", "session_id": "s"}, wait=False
        ),
    ],
    ids=[
        "end_session",
        "edit_memory",
        "put_artifact",
        "append_without_ids",
        "create_without_id",
        "queue_session",
    ],
)
def test_a_call_that_could_apply_twice_is_never_repeated(call) -> None:
    app = Flaky(fails=1, status=503)
    with flaky_client(app) as mr, pytest.raises(UnavailableAPIError):
        call(mr)
    assert len(app.calls) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda mr: mr.append_events(
            "app", "ana", "s1", [{"id": "e1", "role": "user", "text": "hi"}]
        ),
        lambda mr: mr.append_events(
            "app", "ana", "s1", [{"role": "user", "text": "hi"}], expected_version=3
        ),
        lambda mr: mr.create_session("app", "ana", "s1"),
        lambda mr: mr.forget_user("app", "ana"),
        lambda mr: mr.confirm_forget("app", "ana", "token"),
    ],
    ids=[
        "append_with_ids",
        "append_expected_version",
        "create_with_id",
        "delete",
        "confirm_forget",
    ],
)
def test_writes_that_cannot_apply_twice_are_retried(call) -> None:
    app = Flaky(fails=1, status=502, final=404)  # then a final answer: not retried
    with flaky_client(app) as mr, pytest.raises(NotFound):
        call(mr)
    assert len(app.calls) == 2


def test_a_refused_connection_is_retried_even_for_writes() -> None:
    class Counting(httpx.HTTPTransport):
        tries = 0

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            Counting.tries += 1
            return super().handle_request(request)

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        MnemorayClient(f"http://127.0.0.1:{port}", KEY, transport=Counting(), retry=FAST) as mr,
        pytest.raises(httpx.ConnectError),
    ):
        mr.end_session("app", "ana", "s1")  # never reached the server: safe to send again
    assert Counting.tries == FAST.attempts


def test_backoff_is_capped_exponential_with_jitter() -> None:
    policy = RetryPolicy(attempts=6, backoff_s=0.5, max_backoff_s=3.0)
    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (5, 3.0)]:
        waits = [policy.backoff(attempt) for _ in range(200)]
        assert min(waits) >= 0 and max(waits) <= cap and max(waits) > cap / 2
        assert len(set(waits)) > 100  # jittered: clients failing together spread out
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after("soon") is None
    assert parse_retry_after(formatdate(1_000_030.0, usegmt=True), now=1_000_000.0) == 30.0
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)
