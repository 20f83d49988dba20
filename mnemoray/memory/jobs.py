"""Durable ingestion jobs: a queue in SQLite and the worker thread that drains it.

A job is committed to disk before anyone is told about it (the HTTP answer carries
its id), so a crash loses nothing: on start, :meth:`JobQueue.recover` puts the jobs
a killed process left ``running`` back to ``queued`` and the worker runs them again.
That is safe because ingestion is idempotent (records are keyed by content hash),
which is also why several replicas may share one queue file: a job reclaimed while
another replica still runs it is merely ingested twice.

A job's input is a session key (``payload`` None: the session store holds it) or
the posted session dict. A failed run is retried automatically with exponential
backoff (:class:`RetryPolicy`: a caller's error is not retried); a job that fails for
good keeps its input and its public error, for :meth:`JobQueue.retry`. Finished
jobs are pruned after a retention (:class:`RetentionPolicy`); queued and running
ones never are.

- ``job_record``: :class:`Job`, :func:`public_error`, the retry and retention policies;
- ``job_queue``: :class:`JobQueue`, the SQLite file;
- ``job_worker``: :class:`JobWorker`, the thread.
"""

from __future__ import annotations

from mnemoray.memory.job_queue import JobQueue
from mnemoray.memory.job_record import (
    Job,
    JobStatus,
    RetentionPolicy,
    RetryPolicy,
    public_error,
    retryable,
)
from mnemoray.memory.job_worker import JobWorker, OnFinish, RunJob

__all__ = ["Job", "JobQueue", "JobStatus", "JobWorker", "OnFinish", "RetentionPolicy",
           "RetryPolicy", "RunJob", "public_error", "retryable"]
