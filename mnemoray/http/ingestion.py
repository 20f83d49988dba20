"""Memory ingestion behind the HTTP API: every session to distill becomes a durable job.

``:end``, ``POST /v1/memories?wait=false`` and the ``message_count`` / ``inactivity``
triggers all enqueue into one :class:`mnemoray.memory.ingest.queue.JobQueue` (``jobs.db``
next to ``sessions.db``); a :class:`JobWorker` thread in the replica runs them
through the same ``add_session`` memory operation a synchronous call uses. The
answer to a client therefore only waits for one SQLite commit, and a restarted
replica resumes what was left unfinished.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mnemoray import limits
from mnemoray.errors import InvalidInput, Unavailable
from mnemoray.http.metrics import Metrics
from mnemoray.memory.ingest.backends import open_job_queue
from mnemoray.memory.ingest.job import Job, JobForgotten
from mnemoray.memory.ingest.triggers import IngestionTrigger
from mnemoray.memory.ingest.worker import JobWorker
from mnemoray.postgres import is_postgres_url
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore
from mnemoray.settings.serve import ServeSettings

log = logging.getLogger("ray.serve")

MemoryOpSync = Callable[..., Any]
# The reason on what a job wrote while its owner was being forgotten (taken back).
ERASED_WHILE_RUNNING = "forgotten while its ingestion ran"


def jobs_path(settings: ServeSettings) -> str:
    """``jobs.db`` beside the session database (in the store for ``:memory:`` ones); a
    PostgreSQL session database holds the jobs too."""
    sessions = settings.sessions_path
    if is_postgres_url(sessions):
        return sessions
    folder = settings.store_dir if sessions == ":memory:" else Path(sessions).parent
    return str(folder / "jobs.db")


def outcome(job: Job) -> str:
    """A finished job as the ingestion report and metric name it: ``failed``, ``ingested``
    (memories added) or ``unchanged``."""
    if job.status == "failed":
        return "failed"
    return "ingested" if job.memories_added else "unchanged"


class IngestionJobs:
    """The queue, its worker and the trigger of one replica."""

    def __init__(
        self,
        settings: ServeSettings,
        sessions: SessionStore,
        memory_op_sync: MemoryOpSync,
        metrics: Metrics,
    ) -> None:
        self.sessions = sessions
        self._op = memory_op_sync
        self.metrics = metrics
        self.queue = open_job_queue(jobs_path(settings))
        jobs = settings.ingestion.jobs  # failed runs retried with backoff; old jobs pruned
        self.bound = jobs.pending_bound()  # what one API key may have pending
        self.max_sync_embed_chars = settings.server.max_sync_embed_chars
        self.worker = JobWorker(
            self.queue,
            self._run,
            on_finish=self._finished,
            retry=jobs.retry(),
            retention=jobs.retention(),
            on_retry=lambda _job: metrics.ingestions.labels("retried").inc(),
        )
        # end_session learns the id of the job its "ended" notice queued (same thread);
        # ``inline`` makes that job the caller's to run (?wait=true); ``submitter``: whose.
        self._local = threading.local()
        trig = settings.ingestion.trigger
        self.trigger = IngestionTrigger(
            trig.config(),
            self._enqueue_trigger,
            self._forget_session,
            on_error=self._enqueue_failed,
        ).attach(sessions)
        metrics.queue_depth.set_function(self.queue.depth)
        self.worker.start()
        if trig.type == "inactivity":
            self.trigger.start_background(sessions, trig.poll_interval_s)

    def stop(self) -> None:
        self.trigger.stop(timeout=1)
        self.worker.stop(timeout=1)

    # -- enqueue ------------------------------------------------------------------------
    def _enqueue_trigger(self, session: Session) -> None:
        inline = getattr(self._local, "inline", False)
        kind = "session_end" if session.ended else "trigger"
        job = self.queue.enqueue(
            session.app_name,
            session.user_id,
            session.session_id,
            kind=kind,
            running=inline,
            submitter=getattr(self._local, "submitter", None),
        )
        self._local.job = job
        if not inline:
            self.worker.notify()

    def _enqueue_failed(self, exc: BaseException, key: tuple[str, str, str]) -> None:
        # Only the enqueue can fail here: the caller of :end hears of it (no job id).
        log.error("could not queue memory ingestion for session %s/%s/%s: %s", *key, exc)
        self.metrics.ingestions.labels("failed").inc()

    def _forget_session(self, app_name: str, user_id: str, session_id: str) -> None:
        self._op("forget_session", app_name, user_id, session_id=session_id)

    def enqueue_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        """Queue a posted session; QueueFull (429) when ``submitter`` (the caller's
        actor) has as much pending as ``ingestion.jobs`` allows one key."""
        sid = session.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise InvalidInput("required: a non-empty string", field="session.session_id")
        job = self.queue.enqueue(
            app_name,
            user_id,
            sid,
            kind="add_session",
            payload=dict(session),
            submitter=submitter,
            bound=self.bound,
        )
        self.worker.notify()
        return {"job_id": job.job_id, "status": job.status}

    # -- end a session ------------------------------------------------------------------
    def end_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        wait: bool = False,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        """End (or end again: a new job) and queue the ingestion; see ApiBackend. Refused
        before the session is ended: with ``wait``, a session with more text than one
        synchronous add may embed (413); else when ``submitter`` has as much pending as
        one key may (429)."""
        session = self.sessions.get_session(app_name, user_id, session_id)
        if wait:
            limits.check_sync_embed(
                limits.event_text_chars(session.events),
                self.max_sync_embed_chars,
                "session",
                "end it without ?wait=true to queue its ingestion",
            )
        elif submitter is not None:
            self.queue.check_room(submitter, self.bound)
        self._local.job, self._local.inline, self._local.submitter = None, wait, submitter
        try:
            if session.ended:
                self.trigger.ingest(session, force=True)
            else:
                self.sessions.end_session(session)
            job: Job | None = self._local.job
        finally:
            self._local.job, self._local.inline, self._local.submitter = None, False, None
        if job is None:
            raise Unavailable(
                "the session is ended but its memory ingestion could not be "
                "queued; end it again to retry"
            )
        out: dict[str, Any] = {"session_id": session_id, "ended_at": session.ended_at}
        if not wait:
            return {**out, "job_id": job.job_id}
        job = self.worker.run_job(job, auto_retry=False)  # the caller hears of a failure now
        status = outcome(job)
        report: dict[str, Any] = (
            {"status": status, "error": job.error}
            if status == "failed"
            else {"status": status, "memories_added": job.memories_added}
        )
        return {**out, "ingestion": report}

    # -- jobs ----------------------------------------------------------------------------
    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        return self.queue.get(app_name, user_id, job_id).public()

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        job = self.queue.retry(app_name, user_id, job_id, bound=self.bound)
        self.worker.notify()
        return job.public()

    def _run(self, job: Job) -> int:
        session: Session | dict[str, Any]
        if job.payload is not None:
            session = job.payload
        else:  # the session store holds the input; read it whole, as it is now
            session = self.sessions.get_session(job.app_name, job.user_id, job.session_id)
        result = self._op("add_session", job.app_name, job.user_id, session=session)
        if self.queue.erased_since(job):
            # The owner was forgotten while this ran (maybe on another replica, before
            # this write): take back what it wrote; the erase wins.
            for m in result.get("memories", ()):
                self._op(
                    "forget_memory",
                    job.app_name,
                    job.user_id,
                    memory_id=m["memory_id"],
                    reason=ERASED_WHILE_RUNNING,
                    actor="ingestion",
                )
            raise JobForgotten(job.job_id)
        return int(result["added"])

    def _finished(self, job: Job) -> None:
        self.metrics.ingestions.labels(outcome(job)).inc()
        self.metrics.job_latency.labels(job.status).observe(max(0.0, time.time() - job.created_at))


__all__ = ["IngestionJobs", "jobs_path"]
