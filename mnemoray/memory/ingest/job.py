"""One ingestion job as stored, the error text a client may read, and the retry policy.

A job's ``attempts`` counts every run it ever had; ``tries`` counts the runs of the
current round, which a manual retry starts afresh (so a job that failed for good gets
the full automatic budget again once someone retries it).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal

from mnemoray.errors import InvalidInput, MnemorayError, TooManyRequests

JobStatus = Literal["queued", "running", "done", "failed"]
FORGOTTEN = "forgotten"  # the error of a job cancelled because its owner was forgotten


class QueueFull(TooManyRequests):
    """A submitter (an API key) has as many ingestion jobs, or as much input, pending as
    it may (:class:`PendingBound`): the new job is refused, nothing is queued (HTTP 429)."""


class JobForgotten(Exception):
    """Raised by a job's run when its user or session was forgotten while it ran (and
    what it wrote was taken back): the job is cancelled, never retried."""


@dataclass(frozen=True)
class Job:
    job_id: str
    app_name: str
    user_id: str
    kind: str
    session_id: str
    payload: dict[str, Any] | None
    status: JobStatus
    memories_added: int
    error: str | None  # why it failed; on a queued job: why its last try failed
    attempts: int
    created_at: float
    updated_at: float
    tries: int = 0
    not_before: float | None = None  # a queued retry waits until then

    @classmethod
    def _from_row(cls, row: tuple[Any, ...]) -> Job:
        return cls(*(*row[:5], None if row[5] is None else json.loads(row[5]), *row[6:]))

    def public(self) -> dict[str, Any]:
        """What a client sees (``GET /v1/jobs/{id}``)."""
        return {
            "job_id": self.job_id,
            "status": self.status,
            "memories_added": self.memories_added,
            "error": self.error,
        }


def public_error(exc: BaseException) -> str:
    """The error text a client may read: a library error's own message, else the
    class only (internals go to the log)."""
    if isinstance(exc, MnemorayError) and type(exc).public:
        return str(exc)
    return f"internal error ({type(exc).__name__}); the server logged it"


def retryable(exc: BaseException) -> bool:
    """Whether running the job again may succeed: not for a caller's error (a 4xx class:
    a malformed session stays malformed), yes for the rest (a backend down, a store
    busy, a bug that a deploy fixes)."""
    return not (isinstance(exc, MnemorayError) and type(exc).status < 500)


@dataclass(frozen=True)
class RetryPolicy:
    """Automatic retries of a failed job: up to ``max_attempts`` runs per round, the
    n-th retry after ``backoff_s * 2**(n-1)`` seconds (at most ``max_backoff_s``),
    spread by +-``jitter`` of it so replicas sharing a queue do not retry in step.
    ``max_attempts=1``: no automatic retry."""

    max_attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 300.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise InvalidInput(
                f"must be an integer >= 1, got {self.max_attempts!r}", field="max_attempts"
            )
        for name in ("backoff_s", "max_backoff_s"):
            if not float(getattr(self, name)) >= 0:
                raise InvalidInput("must be >= 0", field=name)
        if not 0 <= self.jitter <= 1:
            raise InvalidInput(f"must be in [0, 1], got {self.jitter!r}", field="jitter")

    def should_retry(self, exc: BaseException, tries: int) -> bool:
        return tries < self.max_attempts and retryable(exc)

    def delay(self, tries: int) -> float:
        """Seconds before the next run, after ``tries`` failed runs of this round."""
        base = min(self.max_backoff_s, self.backoff_s * 2.0 ** max(0, tries - 1))
        return max(0.0, base * (1 + self.jitter * random.uniform(-1, 1)))


@dataclass(frozen=True)
class RetentionPolicy:
    """Finished jobs are deleted ``retention_s`` after they finished (checked every
    ``interval_s``); failed-for-good ones only with ``prune_failed`` (they hold input
    nobody has ingested yet). None: keep every job."""

    retention_s: float | None = 7 * 86400.0
    prune_failed: bool = False
    interval_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.retention_s is not None and not float(self.retention_s) >= 0:
            raise InvalidInput("must be >= 0 or None", field="retention_s")
        if not float(self.interval_s) > 0:
            raise InvalidInput("must be > 0", field="interval_s")

    @property
    def statuses(self) -> tuple[str, ...]:
        return ("done", "failed") if self.prune_failed else ("done",)


@dataclass(frozen=True)
class PendingBound:
    """What one submitter (an API key: ``key:<id>``, or ``local`` on a server without
    keys) may have queued or running at once: ``jobs`` jobs, and ``chars`` characters
    of input they hold (a posted session's JSON). One client cannot fill the queue that
    every tenant's ingestion waits in; past it, :class:`QueueFull`."""

    jobs: int = 100
    chars: int = 32_000_000

    def __post_init__(self) -> None:
        for name in ("jobs", "chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"must be an integer >= 1, got {value!r}", field=name)

    def check(self, submitter: str, pending_jobs: int, pending_chars: int, chars: int) -> None:
        """QueueFull unless one more job holding ``chars`` characters fits beside what
        ``submitter`` has pending."""
        if pending_jobs >= self.jobs:
            raise QueueFull(
                f"{submitter} has {pending_jobs} ingestion jobs pending, the most one "
                f"caller may have (ingestion.jobs.max_pending_per_key); ask again when "
                f"some are done"
            )
        if pending_chars + chars > self.chars:
            raise QueueFull(
                f"{submitter}'s pending ingestion jobs hold {pending_chars} characters "
                f"and this one {chars}, over the limit of {self.chars} "
                f"(ingestion.jobs.max_pending_chars_per_key); ask again when some are done"
            )
