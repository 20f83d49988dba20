"""OpenAISummarizer against a real local HTTP server speaking /v1/chat/completions."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mnemoray.sessions.events import Event, model_message, user_message
from mnemoray.summarizers.base import Fact, Summarizer, Summary
from mnemoray.summarizers.errors import ModelRequestError, SummaryParseError
from mnemoray.summarizers.llm_prompt import build_prompt
from mnemoray.summarizers.openai_compat import OpenAISummarizer

Reply = tuple[int, Any, dict[str, str]]  # status, JSON payload, headers

GOOD = json.dumps(
    {
        "summary": "User adopted a parrot named Kiwi.",
        "topics": ["parrots"],
        "key_facts": [
            {"text": "User owns a parrot named Kiwi", "events": [0]},
            {"text": "Invented fact", "events": [42]},
        ],
        "entities": ["Kiwi"],
        "open_threads": ["Which seeds are safe"],
    }
)


def completion(content: str | None, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": content},
            }
        ],
    }


class FakeChatServer:
    """ThreadingHTTPServer on a free port; ``handler(body)`` decides each reply."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.handler: Callable[[dict[str, Any]], Reply] = lambda body: (200, completion(GOOD), {})
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.requests.append((self.path, dict(self.headers), body))
                status, payload, headers = outer.handler(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        # A short poll interval keeps shutdown (once per test) from taking 0.5 s.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def script(self, *replies: Reply) -> None:
        """Answer requests with ``replies`` in order (the last one repeats)."""
        queue = list(replies)

        def handler(body: dict[str, Any]) -> Reply:
            with self._lock:
                return queue.pop(0) if len(queue) > 1 else queue[0]

        self.handler = handler


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    fake = FakeChatServer()
    fake._thread.start()
    yield fake
    fake._server.shutdown()
    fake._server.server_close()


@pytest.fixture
def events() -> list[Event]:
    return [
        user_message("I just adopted a parrot, her name is Kiwi.", timestamp=1_700_000_000),
        model_message("pet_bot", "Lovely! What would you like to know?", timestamp=1_700_000_005),
    ]


class FixedSummarizer(Summarizer):
    name = "fixed"

    def summarize(self, events: Sequence[Event]) -> Summary:
        return Summary(summary="fallback", source_event_ids=tuple(e.id for e in events))


def make(server: FakeChatServer, **kw: Any) -> OpenAISummarizer:
    kw.setdefault("backoff_s", 0.01)
    return OpenAISummarizer(server.base_url, "tiny-chat", **kw)


def test_valid_json_reply_keeps_provenance_and_request_is_openai_shaped(server, events):
    with make(server, api_key="sk-test", max_tokens=300) as summarizer:
        summary = summarizer.summarize(events)
    assert summary == Summary(
        summary="User adopted a parrot named Kiwi.",
        topics=("parrots",),
        key_facts=(Fact("User owns a parrot named Kiwi", (events[0].id,)),),  # e42 dropped
        entities=("Kiwi",),
        open_threads=("Which seeds are safe",),
        source_event_ids=(events[0].id, events[1].id),
    )
    [(path, headers, body)] = server.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body == {
        "model": "tiny-chat",
        "messages": [{"role": "user", "content": build_prompt(events)}],
        "max_tokens": 300,
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
    }


def test_fenced_reply_and_key_from_environment(server, events, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.script((200, completion(f"Here you go:\n```json\n{GOOD}\n```"), {}))
    summary = make(server).summarize(events)
    assert summary.key_facts[0].source_event_ids == (events[0].id,)
    assert server.requests[0][1]["Authorization"] == "Bearer sk-env"


def test_no_key_sends_no_authorization(server, events, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make(server).summarize(events)
    assert "Authorization" not in server.requests[0][1]


def test_server_error_then_success_is_retried(server, events):
    server.script(
        (500, {"error": {"message": "engine overloaded"}}, {}),
        (429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
        (200, completion(GOOD), {}),
    )
    summary = make(server).summarize(events)
    assert summary.summary == "User adopted a parrot named Kiwi."
    assert len(server.requests) == 3
    assert server.requests[0][2] == server.requests[2][2]  # the same request each time


def test_persistent_5xx_gives_up_after_max_retries(server, events):
    server.script((503, {"object": "error", "message": "no replicas"}, {}))
    with pytest.raises(ModelRequestError, match=r"HTTP 503 after 3 attempts: no replicas") as exc:
        make(server, max_retries=2).summarize(events)
    assert exc.value.status == 503
    assert len(server.requests) == 3


def test_client_error_is_not_retried_and_names_status_and_message(server, events):
    server.script((400, {"error": {"message": "The model `tiny-chat` does not exist."}}, {}))
    with pytest.raises(
        ModelRequestError, match=r"HTTP 400: The model `tiny-chat` does not exist\."
    ) as exc:
        make(server).summarize(events)
    assert exc.value.status == 400
    assert len(server.requests) == 1


def test_json_mode_dropped_when_server_rejects_response_format(server, events):
    def handler(body: dict[str, Any]) -> Reply:
        if "response_format" in body:
            return 400, {"detail": "response_format is not supported"}, {}
        return 200, completion(GOOD), {}

    server.handler = handler
    summarizer = make(server)
    summarizer.summarize(events)
    summarizer.summarize(events)
    assert ["response_format" in body for _, _, body in server.requests] == [True, False, False]
    assert summarizer.json_mode is False


def test_summarize_many_sends_windows_concurrently_and_keeps_order(server):
    def handler(body: dict[str, Any]) -> Reply:
        # Echo the window's own first line back as its fact, citing e0.
        first = body["messages"][0]["content"].split("[e0] user (")[1].split(": ", 1)[1]
        first = first.splitlines()[0]
        return (
            200,
            completion(
                json.dumps({"summary": first, "key_facts": [{"text": first, "events": [0]}]})
            ),
            {},
        )

    server.handler = handler
    windows = [[user_message(f"window number {i}", timestamp=1_700_000_000)] for i in range(5)]
    summaries = make(server, concurrency=3).summarize_many(windows)
    assert [s.summary for s in summaries] == [f"window number {i}" for i in range(5)]
    assert [s.key_facts[0].source_event_ids for s in summaries] == [(w[0].id,) for w in windows]
    assert len(server.requests) == 5


def test_unparseable_reply_raises_or_uses_fallback(server, events):
    server.script((200, completion("I cannot summarize this conversation."), {}))
    with pytest.raises(SummaryParseError, match=r"^openai: no summary JSON object"):
        make(server).summarize(events)
    assert make(server, fallback=FixedSummarizer()).summarize(events).summary == "fallback"

    server.script((200, completion('{"summary": "User adopted', "length"), {}))
    with pytest.raises(SummaryParseError, match=r"max_tokens=512"):
        make(server).summarize(events)


def test_malformed_completion_is_a_backend_error(server, events):
    server.script((200, {"choices": []}, {}))
    with pytest.raises(ModelRequestError, match="not a chat completion response"):
        make(server).summarize(events)
    server.script((200, completion(None, "tool_calls"), {}))
    with pytest.raises(ModelRequestError, match="no text content"):
        make(server).summarize(events)


def test_unreachable_server_is_retried_then_reported(events):
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    summarizer = OpenAISummarizer(
        f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_s=0.01, timeout=2
    )
    with pytest.raises(ModelRequestError, match="failed after 2 attempts"):
        summarizer.summarize(events)


def test_bad_arguments():
    with pytest.raises(ValueError, match="base_url"):
        OpenAISummarizer("localhost:8000", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAISummarizer("http://localhost:8000/v1", "")
