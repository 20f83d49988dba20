"""The durable ingestion queue without Ray: order, restart, failure, retry, tenants."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mnemoray.errors import Conflict, InvalidInput, NotFound
from mnemoray.memory.jobs import Job, JobQueue, JobWorker


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "jobs.db"


def test_jobs_survive_reopen_in_order(path: Path) -> None:
    q = JobQueue(path)
    a = q.enqueue("app", "ana", "s1", kind="session_end")
    b = q.enqueue("app", "ana", "s2", kind="add_session", payload={"events": [], "x": "é"})
    q.close()
    q2 = JobQueue(path)
    assert q2.get("app", "ana", a.job_id).status == "queued"
    assert q2.depth() == 2
    first, second = q2.claim(), q2.claim()
    assert first and second and (first.job_id, second.job_id) == (a.job_id, b.job_id)
    assert second.payload == {"events": [], "x": "é"} and second.attempts == 1
    assert q2.claim() is None


def test_running_jobs_go_back_to_queued_on_restart(path: Path) -> None:
    q = JobQueue(path)
    job = q.enqueue("app", "ana", "s1", kind="session_end")
    assert q.claim() is not None  # then the process is killed mid-ingestion
    q.close()
    ran: list[str] = []
    worker = JobWorker(JobQueue(path), lambda j: ran.append(j.session_id) or 3)
    worker.queue.recover()
    done = worker.run_once()
    assert done and done.job_id == job.job_id and done.status == "done"
    assert done.memories_added == 3 and done.attempts == 2 and ran == ["s1"]


def test_a_failed_job_keeps_its_input_and_can_be_retried(path: Path) -> None:
    q = JobQueue(path)
    calls: list[Job] = []

    def run(job: Job) -> int:
        calls.append(job)
        if len(calls) == 1:
            raise InvalidInput("not a session", field="session.events")
        return 2

    worker = JobWorker(q, run)
    job = q.enqueue("app", "ana", "s1", kind="add_session", payload={"k": 1})
    failed = worker.run_once()
    assert failed and failed.status == "failed"
    assert failed.error == "session.events: not a session" and failed.payload == {"k": 1}
    with pytest.raises(Conflict):
        q.retry("app", "ana", q.enqueue("app", "ana", "s2", kind="trigger").job_id)
    assert q.retry("app", "ana", job.job_id).status == "queued"
    done = worker.run_once()
    assert done and done.job_id == job.job_id and done.status == "done"
    assert calls[1].payload == {"k": 1} and done.error is None


def test_internal_errors_are_not_shown(path: Path) -> None:
    q = JobQueue(path)
    q.enqueue("app", "ana", "s1", kind="trigger")

    def boom(job: Job) -> int:
        raise RuntimeError("/srv/secret/path exploded")

    failed = JobWorker(q, boom).run_once()
    assert failed and failed.error and "secret" not in failed.error
    assert "RuntimeError" in failed.error


def test_jobs_are_scoped_to_their_tenant(path: Path) -> None:
    q = JobQueue(path)
    job = q.enqueue("app", "ana", "s1", kind="session_end")
    for app, user in (("app", "bob"), ("other", "ana")):
        with pytest.raises(NotFound):
            q.get(app, user, job.job_id)
        with pytest.raises(NotFound):
            q.retry(app, user, job.job_id)
    assert q.get("app", "ana", job.job_id).public() == {
        "job_id": job.job_id, "status": "queued", "memories_added": 0, "error": None}


def test_the_background_worker_drains_and_wait_returns(path: Path) -> None:
    q = JobQueue(path)
    finished: list[str] = []
    worker = JobWorker(q, lambda j: 1, poll_s=0.05,
                       on_finish=lambda j: finished.append(j.job_id)).start()
    try:
        jobs = [q.enqueue("app", "ana", f"s{i}", kind="trigger") for i in range(3)]
        worker.notify()
        last = q.wait("app", "ana", jobs[-1].job_id, timeout_s=5)
        assert last.status == "done"
        assert all(q.wait("app", "ana", j.job_id, timeout_s=5).status == "done" for j in jobs)
        assert q.depth() == 0
    finally:
        worker.stop()
    assert finished == [j.job_id for j in jobs]  # on_finish runs after the commit
    assert not any(t.name == "mnemoray-ingestion-jobs" and t.is_alive()
                   for t in threading.enumerate())


def test_an_inline_job_is_never_claimed_by_the_worker(path: Path) -> None:
    q = JobQueue(path)
    job = q.enqueue("app", "ana", "s1", kind="session_end", running=True)
    assert job.status == "running" and q.claim() is None
