"""Durable ingestion jobs: a queue in SQLite and the worker thread that drains it.

A job is committed to disk before anyone is told about it (the HTTP answer carries
its id), so a crash loses nothing: the worker that runs a job marks it with its
queue's ``owner`` and beats for it every few seconds; a job whose runner stopped beating
(a killed process) goes back to ``queued`` (:meth:`JobQueue.recover`, at a worker's
start and periodically) and is run again, while a job another live replica runs is left
to it. Running one twice would be safe anyway: ingestion is idempotent (records are
keyed by content hash).

A job's input is a session key (``payload`` None: the session store holds it) or
the posted session dict. A failed run is retried automatically with exponential
backoff (:class:`RetryPolicy`: a caller's error is not retried); a job that fails for
good keeps its input and its public error, for :meth:`JobQueue.retry`. Finished
jobs are pruned after a retention (:class:`RetentionPolicy`); queued and running
ones never are. Forgetting a user or a session cancels their queued and failed jobs and
drops their stored input (:meth:`JobQueue.forget_owner`, wired to a service by
``job_guard.guard_jobs``); a job already running writes nothing, or takes back what it
wrote (:meth:`JobQueue.erased_since`).

- ``job_record``: :class:`Job`, :func:`public_error`, the retry and retention policies;
- ``job_queue``: :class:`JobQueue`, the SQLite file;
- ``job_worker``: :class:`JobWorker`, the thread.
"""

from __future__ import annotations

from mnemoray.memory.job_queue import JobQueue
from mnemoray.memory.job_record import (
    FORGOTTEN,
    Job,
    JobForgotten,
    JobStatus,
    RetentionPolicy,
    RetryPolicy,
    public_error,
    retryable,
)
from mnemoray.memory.job_worker import JobWorker, OnFinish, RunJob

__all__ = ["FORGOTTEN", "Job", "JobForgotten", "JobQueue", "JobStatus", "JobWorker",
           "OnFinish", "RetentionPolicy", "RetryPolicy", "RunJob", "public_error", "retryable"]
