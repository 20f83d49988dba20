"""What the HTTP model backends (summarizer, embedder) share about a failed request:
which failures are worth retrying, how long to wait, and the server's own words."""

from __future__ import annotations

import httpx

MAX_RETRY_AFTER_S = 30.0  # never let a server's Retry-After stall a batch job for long


def retryable(status: int) -> bool:
    """429 (rate limited) and 5xx (overloaded, restarting) may pass on a later try."""
    return status == 429 or status >= 500


def retry_delay(response: httpx.Response | None, attempt: int, backoff_s: float) -> float:
    """The server's Retry-After (seconds, capped) if it sent one, else exponential backoff."""
    header = response.headers.get("retry-after") if response is not None else None
    try:
        if header is not None:
            return min(max(float(header), 0.0), MAX_RETRY_AFTER_S)
    except ValueError:
        pass  # an HTTP-date: fall back to our own schedule
    return backoff_s * 2**attempt


def server_message(response: httpx.Response) -> str:
    """The error text in OpenAI (``error.message``), vLLM (``message``) or FastAPI shape."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return one_line(str(error["message"]))
        for key in ("message", "detail", "error"):
            if body.get(key):
                return one_line(str(body[key]))
    return one_line(response.text)[:300] or response.reason_phrase


def one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = ["MAX_RETRY_AFTER_S", "one_line", "retry_delay", "retryable", "server_message"]
