"""``ingestion.jobs``: automatic retries and retention of the durable ingestion jobs
(``mnemoray.memory.ingest``), and how many one API key may have pending."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mnemoray.memory.ingest.job import PendingBound, RetentionPolicy, RetryPolicy


class JobSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(
        5,
        ge=1,
        description="runs of a failing job before it fails for good (1: no automatic retry)",
    )
    backoff_s: float = Field(
        1.0, ge=0, description="delay before the first retry; doubled for each next one"
    )
    max_backoff_s: float = Field(300.0, ge=0)
    retention_s: float | None = Field(
        7 * 86400.0,
        ge=0,
        description="delete finished jobs this long after they finished (null: keep all)",
    )
    prune_failed: bool = Field(
        False, description="prune failed-for-good jobs too (they hold input nobody ingested)"
    )
    prune_interval_s: float = Field(3600.0, gt=0)
    max_pending_per_key: int = Field(
        PendingBound.jobs,
        ge=1,
        description="queued or running jobs one API key (all callers of a server without "
        "keys together) may have; past it a new one is refused with 429",
    )
    max_pending_chars_per_key: int = Field(
        PendingBound.chars,
        ge=1,
        description="characters of input (posted sessions) one API key's pending jobs may "
        "hold; past it 429",
    )

    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            backoff_s=self.backoff_s,
            max_backoff_s=self.max_backoff_s,
        )

    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(
            retention_s=self.retention_s,
            prune_failed=self.prune_failed,
            interval_s=self.prune_interval_s,
        )

    def pending_bound(self) -> PendingBound:
        return PendingBound(jobs=self.max_pending_per_key, chars=self.max_pending_chars_per_key)
