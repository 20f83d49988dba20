"""When to ask again: exponential backoff with full jitter, for calls that are safe to
repeat, on a lost connection, 429, 502, 503 or 504, honouring ``Retry-After``.

A call is safe to repeat when a second copy cannot apply its change twice: reads,
deletes, recall/compile, and writes that are idempotent by design (content-addressed
memories, a session posted again, appends whose events carry ids). A connection that
was never opened is retried for every call: nothing reached the server.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import httpx

#: Answers that say "not now" rather than "no": worth asking again after a while.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date);
    None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts``: tries in all (1: never retry). The n-th retry waits a random time
    in ``[0, min(max_backoff_s, backoff_s * 2**(n-1))]`` (full jitter: many clients
    failing together do not come back together), or what ``Retry-After`` says; an
    answer asking for more than ``max_retry_after_s`` is returned to the caller."""

    attempts: int = 4
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0
    statuses: frozenset[int] = field(default=RETRY_STATUSES)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts: at least 1 (1 means no retry)")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff_s, max_backoff_s, max_retry_after_s: not negative")

    def backoff(self, attempt: int) -> float:
        """The jittered wait after failed try number ``attempt`` (1-based)."""
        cap = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return random.uniform(0.0, cap)

    def after_error(
        self, exc: httpx.TransportError, attempt: int, retry_safe: bool
    ) -> float | None:
        """Seconds to wait before try ``attempt + 1`` after ``exc``; None: give up."""
        if attempt >= self.attempts:
            return None
        never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
        return self.backoff(attempt) if retry_safe or never_sent else None

    def after_status(self, resp: httpx.Response, attempt: int, retry_safe: bool) -> float | None:
        """Seconds to wait before try ``attempt + 1`` after answer ``resp``; None: it
        is the answer (a success, a final error, or no tries left)."""
        if not retry_safe or resp.status_code not in self.statuses or attempt >= self.attempts:
            return None
        asked = parse_retry_after(resp.headers.get("retry-after"))
        if asked is None:
            return self.backoff(attempt)
        return asked if asked <= self.max_retry_after_s else None


#: No retries at all (tests, or callers with their own policy).
NO_RETRY = RetryPolicy(attempts=1)
