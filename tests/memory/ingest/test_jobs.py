"""The durable ingestion queue without Ray: order, restart, failure, retry, tenants,
automatic retries with backoff, pruning of finished jobs, and what one key may queue."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from mnemoray.errors import ConfigError, Conflict, InvalidInput, NotFound, Unavailable
from mnemoray.memory.ingest.backends import open_job_queue
from mnemoray.memory.ingest.job import (
    Job,
    PendingBound,
    QueueFull,
    RetentionPolicy,
    RetryPolicy,
)
from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.memory.ingest.worker import JobWorker


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each queue in turn: a SQLite file, a fresh database on the test PostgreSQL server."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "store" / "jobs.db")


def test_jobs_survive_reopen_in_order(location: str) -> None:
    q = open_job_queue(location)
    a = q.enqueue("app", "ana", "s1", kind="session_end")
    b = q.enqueue("app", "ana", "s2", kind="add_session", payload={"events": [], "x": "é"})
    q.close()
    q2 = open_job_queue(location)
    assert q2.get("app", "ana", a.job_id).status == "queued"
    assert q2.depth() == 2
    first, second = q2.claim(), q2.claim()
    assert first and second and (first.job_id, second.job_id) == (a.job_id, b.job_id)
    assert second.payload == {"events": [], "x": "é"} and second.attempts == 1
    assert q2.claim() is None


def test_running_jobs_go_back_to_queued_on_restart(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="session_end")
    assert q.claim() is not None  # then the process is killed mid-ingestion
    q.close()
    ran: list[str] = []
    worker = JobWorker(open_job_queue(location), lambda j: ran.append(j.session_id) or 3)
    worker.queue.recover()
    done = worker.run_once()
    assert done and done.job_id == job.job_id and done.status == "done"
    assert done.memories_added == 3 and done.attempts == 2 and ran == ["s1"]


def test_a_failed_job_keeps_its_input_and_can_be_retried(location: str) -> None:
    q = open_job_queue(location)
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


def test_internal_errors_are_not_shown(location: str) -> None:
    q = open_job_queue(location)
    q.enqueue("app", "ana", "s1", kind="trigger")

    def boom(job: Job) -> int:
        raise RuntimeError("/srv/secret/path exploded")

    failed = JobWorker(q, boom).run_once()
    assert failed and failed.error and "secret" not in failed.error
    assert "RuntimeError" in failed.error


def test_jobs_are_scoped_to_their_tenant(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="session_end")
    for app, user in (("app", "bob"), ("other", "ana")):
        with pytest.raises(NotFound):
            q.get(app, user, job.job_id)
        with pytest.raises(NotFound):
            q.retry(app, user, job.job_id)
    assert q.get("app", "ana", job.job_id).public() == {
        "job_id": job.job_id,
        "status": "queued",
        "memories_added": 0,
        "error": None,
    }


def test_the_background_worker_drains_and_wait_returns(location: str) -> None:
    q = open_job_queue(location)
    finished: list[str] = []
    worker = JobWorker(
        q, lambda j: 1, poll_s=0.05, on_finish=lambda j: finished.append(j.job_id)
    ).start()
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
    assert not any(
        t.name == "mnemoray-ingestion-jobs" and t.is_alive() for t in threading.enumerate()
    )


def test_an_inline_job_is_never_claimed_by_the_worker(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="session_end", running=True)
    assert job.status == "running" and q.claim() is None


# -- automatic retries ---------------------------------------------------------------------
def test_a_failed_run_is_retried_with_backoff_then_fails_for_good(location: str) -> None:
    q = open_job_queue(location)
    calls: list[int] = []

    def flaky(job: Job) -> int:
        calls.append(job.tries)
        raise Unavailable("summarizer backend down")

    worker = JobWorker(q, flaky, retry=RetryPolicy(max_attempts=3, backoff_s=10, jitter=0))
    job = q.enqueue("app", "ana", "s1", kind="add_session", payload={"k": 1})
    first = worker.run_once()
    assert first and first.status == "queued" and first.error == "summarizer backend down"
    assert first.not_before is not None and 9 <= first.not_before - time.time() <= 10
    assert q.claim() is None  # not due yet: the backoff holds it
    assert q.depth() == 1
    second = worker.run_once(now=time.time() + 11)
    assert second and second.status == "queued" and second.tries == 2
    assert second.not_before is not None and 19 <= second.not_before - time.time() <= 20
    final = worker.run_once(now=time.time() + 60)
    assert final and final.status == "failed" and final.attempts == 3 and calls == [1, 2, 3]
    assert final.error == "summarizer backend down" and final.payload == {"k": 1}
    # Failed for good, still retryable by hand, with a fresh round of automatic retries.
    again = q.retry("app", "ana", job.job_id)
    assert again.status == "queued" and again.tries == 0 and again.error is None
    done = JobWorker(q, lambda j: 5).run_once()
    assert done and done.status == "done" and done.attempts == 4 and done.memories_added == 5


def test_a_callers_error_is_not_retried(location: str) -> None:
    q = open_job_queue(location)
    q.enqueue("app", "ana", "s1", kind="add_session", payload={})

    def bad(job: Job) -> int:
        raise InvalidInput("not a session", field="session.events")

    failed = JobWorker(q, bad, retry=RetryPolicy(max_attempts=5)).run_once()
    assert failed and failed.status == "failed" and failed.attempts == 1


def test_an_inline_run_fails_at_once(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="session_end", running=True)

    def down(job: Job) -> int:
        raise Unavailable("down")

    out = JobWorker(q, down).run_job(job, auto_retry=False)
    assert out.status == "failed" and out.error == "down"


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(max_attempts=9, backoff_s=1, max_backoff_s=5, jitter=0)
    assert [policy.delay(n) for n in range(1, 6)] == [1, 2, 4, 5, 5]
    spread = RetryPolicy(backoff_s=10, jitter=0.1)
    assert all(9 <= spread.delay(1) <= 11 for _ in range(50))
    for bad, name in (
        ({"max_attempts": 0}, "max_attempts"),
        ({"jitter": 2}, "jitter"),
        ({"backoff_s": -1}, "backoff_s"),
    ):
        with pytest.raises(InvalidInput) as exc:
            RetryPolicy(**bad)
        assert exc.value.field == name


def test_the_background_worker_retries_until_done(location: str) -> None:
    q = open_job_queue(location)
    finished: list[Job] = []
    failures = [Unavailable("busy"), RuntimeError("flaky")]

    def run(job: Job) -> int:
        if failures:
            raise failures.pop(0)
        return 7

    retried: list[Job] = []
    worker = JobWorker(
        q,
        run,
        poll_s=0.05,
        on_finish=finished.append,
        on_retry=retried.append,
        retry=RetryPolicy(max_attempts=5, backoff_s=0.05),
    ).start()
    try:
        job = q.enqueue("app", "ana", "s1", kind="trigger")
        worker.notify()
        done = q.wait("app", "ana", job.job_id, timeout_s=10)
    finally:
        worker.stop()
    assert done.status == "done" and done.attempts == 3 and done.memories_added == 7
    assert done.error is None
    assert [j.status for j in finished] == ["done"]  # on_finish: only the final outcome
    assert [(j.status, j.error) for j in retried] == [
        ("queued", "busy"),
        ("queued", "internal error (RuntimeError); the server logged it"),
    ]


def test_a_job_that_keeps_stopping_its_process_fails_on_recovery(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="session_end", running=True)  # run 1 of 1
    assert q.recover(max_tries=1) == 0
    failed = q.get("app", "ana", job.job_id)
    assert failed.status == "failed" and failed.error and "stopped" in failed.error


# -- pruning -------------------------------------------------------------------------------
def _count(q: JobQueue, sql: str) -> int:
    with q._read() as c:
        return int(c.execute(sql).fetchone()[0])


def _age(q: JobQueue, job_id: str, seconds: float) -> None:
    with q._tx() as c:
        c.execute("UPDATE jobs SET updated_at = updated_at - ? WHERE job_id = ?", (seconds, job_id))


def test_prune_removes_only_old_finished_jobs(location: str) -> None:
    q = open_job_queue(location)
    worker = JobWorker(q, lambda j: 1, retry=RetryPolicy(max_attempts=1))
    old_done, new_done = (q.enqueue("app", "ana", f"d{i}", kind="trigger") for i in range(2))
    for _ in range(2):
        assert worker.run_once() is not None
    failed = q.enqueue("app", "ana", "f", kind="trigger")
    JobWorker(q, lambda j: 1 / 0, retry=RetryPolicy(max_attempts=1)).run_once()
    queued = q.enqueue("app", "ana", "q", kind="trigger")
    running = q.enqueue("app", "ana", "r", kind="trigger", running=True)
    for job in (old_done, failed, queued, running):
        _age(q, job.job_id, 3600)
    assert q.prune(600) == 1
    with pytest.raises(NotFound):
        q.get("app", "ana", old_done.job_id)
    kept = [q.get("app", "ana", j.job_id).status for j in (new_done, failed, queued, running)]
    assert kept == ["done", "failed", "queued", "running"]
    assert q.prune(600, statuses=("done", "failed")) == 1  # asked: failed ones go too
    assert q.depth() == 2
    with pytest.raises(InvalidInput) as exc:
        q.prune(0, statuses=("queued",))
    assert exc.value.field == "statuses"


def test_the_worker_prunes_after_the_retention(location: str) -> None:
    q = open_job_queue(location)
    worker = JobWorker(
        q, lambda j: 1, poll_s=0.05, retention=RetentionPolicy(retention_s=0, interval_s=0.05)
    ).start()
    try:
        job = q.enqueue("app", "ana", "s1", kind="trigger")
        worker.notify()
        assert q.wait("app", "ana", job.job_id, timeout_s=5).status == "done"
        deadline = time.monotonic() + 5
        while _count(q, "SELECT COUNT(*) FROM jobs WHERE status = 'done'") and (
            time.monotonic() < deadline
        ):
            with q.changed:
                q.changed.wait(0.05)
    finally:
        worker.stop()
    with pytest.raises(NotFound):
        q.get("app", "ana", job.job_id)


def test_a_queue_file_of_the_first_schema_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "store" / "jobs.db"
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE jobs (job_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
            "app_name TEXT NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL, "
            "session_id TEXT NOT NULL, payload TEXT, status TEXT NOT NULL, "
            "memories_added INTEGER NOT NULL DEFAULT 0, error TEXT, "
            "attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, "
            "updated_at REAL NOT NULL)"
        )
        old.execute(
            "INSERT INTO jobs (job_id, seq, app_name, user_id, kind, session_id, "
            "status, created_at, updated_at) VALUES ('j1', 1, 'app', 'ana', "
            "'trigger', 's1', 'queued', 0, 0)"
        )
    q = JobQueue(path)
    job = q.claim()
    assert job and job.job_id == "j1" and job.tries == 1 and job.not_before is None
    # The old job was nobody's; a new one is its submitter's, with its input's size.
    q.enqueue("app", "ana", "s2", kind="add_session", payload={"k": "v"}, submitter="key:a")
    assert q.pending("key:a") == (1, len('{"k": "v"}'))


# -- a forget reaches the queue (a job queued before an erase writes nothing) ----------
def _service_worker(tmp_path: Path, q: JobQueue):
    from mnemoray.memory.ingest.guard import guard_jobs
    from mnemoray.memory.service.json_ops import MemoryOps
    from mnemoray.memory.service.service import MemoryService
    from tests.support.factories import parrot  # noqa: F401  (the session below)

    svc = MemoryService.open(tmp_path / "svc", embedder=None)
    guard_jobs(svc, q)
    ops = MemoryOps(svc)
    ran: list[str] = []

    def run(job: Job) -> int:
        ran.append(job.job_id)
        return ops.call("add_session", job.app_name, job.user_id, {"session": job.payload})["added"]

    return svc, JobWorker(q, run), ran


def test_forgetting_a_user_cancels_their_queued_jobs_and_drops_their_input(
    tmp_path: Path, location: str
) -> None:
    from mnemoray.memory.ingest.job import FORGOTTEN
    from tests.support.factories import parrot

    q = open_job_queue(location)
    svc, worker, ran = _service_worker(tmp_path, q)
    queued = q.enqueue("app", "alice", "parrot", kind="add_session", payload=parrot().to_dict())
    failed = q.enqueue("app", "alice", "s0", kind="add_session", payload={"secret": 1})
    q.fail(failed.job_id, "boom")
    other = q.enqueue("app", "bob", "b1", kind="add_session", payload={"k": 1})
    svc.forget_user("app", "alice", reason="GDPR erase")
    for job in (queued, failed):
        now = q.get("app", "alice", job.job_id)
        assert (now.status, now.error, now.payload) == ("failed", FORGOTTEN, None)
    assert q.get("app", "bob", other.job_id).payload == {"k": 1}  # another user's: untouched
    with pytest.raises(Conflict):
        q.retry("app", "alice", queued.job_id)
    assert worker.run_once().job_id == other.job_id  # alice's jobs are not due any more
    assert ran == [other.job_id] and svc.snapshot().rows_for_user("app", "alice") == []
    # A session ingested after the erase is stored as usual.
    later = q.enqueue("app", "alice", "parrot", kind="add_session", payload=parrot().to_dict())
    assert worker.run_once().job_id == later.job_id
    assert svc.snapshot().rows_for_user("app", "alice")
    svc.close()


def test_a_job_claimed_before_an_erase_writes_nothing(tmp_path: Path, location: str) -> None:
    from mnemoray.memory.ingest.job import FORGOTTEN
    from tests.support.factories import parrot

    q = open_job_queue(location)
    svc, worker, ran = _service_worker(tmp_path, q)
    mine = q.enqueue("app", "alice", "parrot", kind="add_session", payload=parrot().to_dict())
    kept = q.enqueue("app", "alice", "s2", kind="add_session", payload={"k": 1})
    claimed = q.claim()  # running on another replica when the session is forgotten
    assert claimed is not None and claimed.job_id == mine.job_id
    svc.forget_session("app", "alice", "parrot", reason="asked")
    assert q.get("app", "alice", kept.job_id).status == "queued"  # another session
    done = worker.run_job(claimed)
    assert (done.status, done.error, done.payload) == ("failed", FORGOTTEN, None)
    assert ran == [] and svc.snapshot().rows_for_user("app", "alice") == []
    svc.close()


def test_done_jobs_drop_their_input(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="add_session", payload={"k": 1})
    done = JobWorker(q, lambda j: 1).run_once()
    assert done is not None and done.job_id == job.job_id
    assert (done.status, done.payload) == ("done", None)


# -- replicas sharing a queue: only a dead runner's jobs are taken over ----------------
def test_a_starting_replica_leaves_another_replicas_running_job_alone(location: str) -> None:
    live, starting = open_job_queue(location), open_job_queue(location)
    job = live.enqueue("app", "ana", "s1", kind="session_end")
    assert live.claim() is not None  # the live replica runs it
    worker = JobWorker(starting, lambda j: 1, poll_s=0.05, stale_after_s=60).start()
    try:
        time.sleep(0.2)
        assert starting.get("app", "ana", job.job_id).status == "running"  # not requeued
        assert starting.recover(max_tries=1, stale_after_s=60) == 0  # nor failed
        assert starting.get("app", "ana", job.job_id).status == "running"
        # The runner dies: no heartbeat for longer than the limit, then it is taken over.
        assert worker.recover_stale(now=time.time() + 120) == 1
        assert starting.wait("app", "ana", job.job_id, timeout_s=5).status == "done"
    finally:
        worker.stop()


def test_the_worker_beats_for_the_jobs_it_runs(location: str) -> None:
    q = open_job_queue(location)
    job = q.enqueue("app", "ana", "s1", kind="session_end", running=True)  # run inline

    def heartbeat() -> float:
        with q._read() as c:
            row = c.execute("SELECT heartbeat FROM jobs WHERE job_id = ?", (job.job_id,))
            return float(row.fetchone()[0])

    first = heartbeat()
    worker = JobWorker(q, lambda j: 1, heartbeat_s=0.05).start()
    try:
        deadline = time.monotonic() + 5
        while heartbeat() == first and time.monotonic() < deadline:
            time.sleep(0.02)
        assert heartbeat() > first and q.get("app", "ana", job.job_id).status == "running"
    finally:
        worker.stop()


def test_a_queue_refuses_a_url_instead_of_making_a_file_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^path: redis://q/0 is not supported here") as raised:
        JobQueue("redis://q/0")
    assert raised.value.field == "path" and list(tmp_path.iterdir()) == []


# -- what one submitter may have pending ------------------------------------------------
def test_a_submitter_past_its_pending_jobs_is_refused_and_others_are_not(location: str) -> None:
    q = open_job_queue(location)
    bound = PendingBound(jobs=2, chars=1_000)
    first = q.enqueue(
        "app", "ana", "s1", kind="add_session", payload={}, submitter="key:a", bound=bound
    )
    q.enqueue("app", "bob", "s1", kind="add_session", payload={}, submitter="key:a", bound=bound)
    with pytest.raises(QueueFull, match=r"key:a has 2 ingestion jobs pending.*max_pending_per_key"):
        q.enqueue("app", "cy", "s1", kind="add_session", payload={}, submitter="key:a", bound=bound)
    assert q.depth() == 2  # nothing was queued
    # Another key, and a trigger's job (nobody's), are not held up by key:a's.
    q.enqueue("app", "ana", "s2", kind="add_session", payload={}, submitter="key:b", bound=bound)
    q.enqueue("app", "ana", "s3", kind="trigger")
    with pytest.raises(QueueFull):
        q.check_room("key:a", bound)
    q.check_room("key:b", bound)
    # A finished job frees its place; retrying a failed one takes a place again.
    q.finish(first.job_id, 0)
    assert q.pending("key:a") == (1, 2)
    failed = q.enqueue("app", "dan", "s1", kind="add_session", payload={}, submitter="key:a")
    q.fail(failed.job_id, "not a session")
    q.enqueue("app", "eve", "s1", kind="add_session", payload={}, submitter="key:a", bound=bound)
    with pytest.raises(QueueFull):
        q.retry("app", "dan", failed.job_id, bound=bound)
    assert q.get("app", "dan", failed.job_id).status == "failed"
    q.finish(q.claim().job_id, 0)  # type: ignore[union-attr]
    assert q.retry("app", "dan", failed.job_id, bound=bound).status == "queued"
    assert q.pending("key:a") == (2, 4)


def test_a_submitter_past_its_pending_characters_is_refused(location: str) -> None:
    q = open_job_queue(location)
    bound = PendingBound(jobs=10, chars=100)
    big = {"events": [{"text": "x" * 60}]}
    q.enqueue("app", "ana", "s1", kind="add_session", payload=big, submitter="local", bound=bound)
    with pytest.raises(
        QueueFull, match=r"hold \d+ characters and this one \d+, over the limit of 100"
    ):
        q.enqueue(
            "app", "ana", "s2", kind="add_session", payload=big, submitter="local", bound=bound
        )
    small = q.enqueue(
        "app", "ana", "s3", kind="add_session", payload={}, submitter="local", bound=bound
    )
    assert small.status == "queued" and q.pending("local")[0] == 2


@pytest.mark.parametrize(
    "field,value", [("jobs", 0), ("chars", -1), ("jobs", True), ("chars", 1.5)]
)
def test_a_pending_bound_is_a_positive_integer(field: str, value: object) -> None:
    with pytest.raises(InvalidInput) as raised:
        PendingBound(**{field: value})  # type: ignore[arg-type]
    assert raised.value.field == field
