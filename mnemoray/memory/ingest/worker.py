"""The worker thread that drains the ingestion queue, retries failures with backoff
and prunes finished jobs after their retention."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mnemoray.memory.ingest.job import Job, JobForgotten, RetentionPolicy, RetryPolicy, public_error
from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.periodic import Periodic

log = logging.getLogger(__name__)

RunJob = Callable[[Job], int]  # runs the ingestion, returns the memories it added
OnFinish = Callable[[Job], object]


class JobWorker:
    """One daemon thread: claims due jobs in order and runs ``run(job)``, which returns
    the memories it added. A failure is retried per ``retry`` (requeued with backoff,
    its error kept) and otherwise marks the job failed for good; ``on_finish`` runs
    once a job is done or failed for good, ``on_retry`` each time a failed run is
    requeued. ``retention``: finished jobs are pruned from the loop (None: never)."""

    def __init__(
        self,
        queue: JobQueue,
        run: RunJob,
        *,
        poll_s: float = 0.5,
        on_finish: OnFinish | None = None,
        retry: RetryPolicy | None = None,
        retention: RetentionPolicy | None = None,
        on_retry: OnFinish | None = None,
        heartbeat_s: float = 5.0,
        stale_after_s: float = 60.0,
    ) -> None:
        self.queue = queue
        self._run = run
        self._poll_s = poll_s
        self._on_finish = on_finish
        self._on_retry = on_retry
        self.retry = retry if retry is not None else RetryPolicy()
        self.retention = retention
        self._next_prune = 0.0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # Replicas share a queue: a job is taken from its runner only once the runner
        # stopped beating for ``stale_after_s`` (it died), never while it still runs it.
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self._beater = Periodic(self._beat, heartbeat_s, "mnemoray-jobs-heartbeat")
        self._next_recover = 0.0

    def start(self) -> JobWorker:  # resume what a stopped process left, then drain
        # A job cut short once is always resumed; one whose runs keep stopping the process
        # (e.g. out of memory) fails once it used its attempts, instead of looping forever.
        self.recover_stale()
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._loop, name="mnemoray-ingestion-jobs", daemon=True
        )
        self._thread.start()
        self._next_recover = time.monotonic() + self.stale_after_s / 2
        self._beater.start()
        return self

    def recover_stale(self, now: float | None = None) -> int:
        """Requeue the jobs whose runner stopped beating (a replica that died)."""
        resumed = self.queue.recover(
            max_tries=max(2, self.retry.max_attempts), stale_after_s=self.stale_after_s, now=now
        )
        if resumed:
            log.warning("ingestion jobs: %d left running by a stopped process, requeued", resumed)
            self.notify()
        return resumed

    def _beat(self) -> None:
        try:
            self.queue.beat()
            if time.monotonic() >= self._next_recover:  # another replica may have died
                self._next_recover = time.monotonic() + self.stale_after_s / 2
                self.recover_stale()
        except Exception:  # the next beat tries again
            log.exception("ingestion jobs: heartbeat failed")

    def notify(self) -> None:
        """A job was queued: look now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stopping.set()
        self._wake.set()
        self._beater.stop(timeout)
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def run_once(self, now: float | None = None) -> Job | None:
        """Claim and run one due job (None: none was due)."""
        job = self.queue.claim(now)
        if job is not None:
            job = self.run_job(job)
        return job

    def run_job(self, job: Job, *, auto_retry: bool = True) -> Job:
        """Run a job already marked running; record done, a retry, or failed.
        ``auto_retry`` False: a failure is final at once (a caller waiting on the job
        hears of it now and may retry it). A job whose user or session was forgotten
        after it was queued is cancelled unrun (:meth:`JobQueue.forget_owner`)."""
        try:
            if self.queue.erased_since(job):
                raise JobForgotten(job.job_id)
            added = self._run(job)
        except JobForgotten:
            log.info(
                "ingestion job %s (%s/%s/%s) cancelled: its owner was forgotten",
                job.job_id,
                job.app_name,
                job.user_id,
                job.session_id,
            )
            job = self.queue.cancel_forgotten(job.job_id)
        except Exception as exc:  # recorded on the job, never lost
            error = public_error(exc)
            if auto_retry and self.retry.should_retry(exc, job.tries):
                delay = self.retry.delay(job.tries)
                log.warning(
                    "ingestion job %s (%s/%s/%s) failed (try %d of %d), retried in %.1fs: %s",
                    job.job_id,
                    job.app_name,
                    job.user_id,
                    job.session_id,
                    job.tries,
                    self.retry.max_attempts,
                    delay,
                    exc,
                )
                job = self.queue.requeue(job.job_id, error, time.time() + delay)
                self._notify(self._on_retry, job)
                return job
            log.error(
                "ingestion job %s (%s/%s/%s) failed",
                job.job_id,
                job.app_name,
                job.user_id,
                job.session_id,
                exc_info=exc,
            )
            job = self.queue.fail(job.job_id, error)
        else:
            job = self.queue.finish(job.job_id, int(added))
        self._notify(self._on_finish, job)
        return job

    @staticmethod
    def _notify(callback: OnFinish | None, job: Job) -> None:
        if callback is not None:
            try:
                callback(job)
            except Exception:  # a metric's failure is no job's failure
                log.exception("ingestion jobs: callback for job %s failed", job.job_id)

    def prune(self, now: float | None = None) -> int:
        """Delete finished jobs past the retention (0 without one)."""
        r = self.retention
        if r is None or r.retention_s is None:
            return 0
        pruned = self.queue.prune(r.retention_s, r.statuses, now=now)
        if pruned:
            log.info(
                "ingestion jobs: pruned %d finished job(s) older than %.0fs", pruned, r.retention_s
            )
        return pruned

    def _idle_wait(self) -> float:
        """Until the next poll, or sooner when a delayed retry falls due."""
        due = self.queue.next_due()
        if due is None:
            return self._poll_s
        return max(0.0, min(self._poll_s, due - time.time()))

    def _loop(self) -> None:
        while not self._stopping.is_set():
            if self.retention is not None and time.monotonic() >= self._next_prune:
                self._next_prune = time.monotonic() + self.retention.interval_s
                try:
                    self.prune()
                except Exception:  # housekeeping must not stop ingestion
                    log.exception("ingestion jobs: prune failed")
            # Cleared before the claim, not after the wait: a notify() that lands between
            # an empty claim and the wait must still wake it (else it waits a whole poll).
            self._wake.clear()
            try:
                job = self.run_once()
                wait = 0.0 if job is not None else self._idle_wait()
            except Exception:  # a store hiccup must not kill the worker
                log.exception("ingestion jobs: claim failed")
                job, wait = None, self._poll_s
            if job is None:  # idle: until the next poll, a due retry, or a notify()
                self._wake.wait(wait if wait > 0 else 0.01)
