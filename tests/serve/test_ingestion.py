"""The ingress's ingestion jobs without Ray: ``:end``, triggers and restarts over the
durable queue, with the memory operation replaced by a recorder."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mnemoray.errors import InvalidInput, Unavailable
from mnemoray.http.ingestion import IngestionJobs, jobs_path
from mnemoray.http.metrics import Metrics
from mnemoray.memory.ingest.queue import JobQueue
from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.settings.serve import parse_settings


class Recorder:
    """``memory_op_sync`` as the ingress passes it: records each add_session."""

    def __init__(self) -> None:
        self.sessions: list[Any] = []
        self.fail: Exception | None = None
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        self.gate.wait(10)
        if op != "add_session":
            return 0
        if self.fail is not None:
            raise self.fail
        self.sessions.append(kwargs["session"])
        return {"added": 2}


def open_jobs(
    tmp_path: Path, op: Recorder, job_settings: dict[str, Any] | None = None, **trigger: Any
) -> IngestionJobs:
    settings = parse_settings(
        {
            "store": str(tmp_path / "store"),
            "ingestion": {"trigger": trigger, "jobs": job_settings or {}},
        }
    )
    return IngestionJobs(
        settings, SQLiteSessionStore(settings.sessions_path), op, Metrics(lambda: {})
    )


def wait_done(
    jobs: IngestionJobs, job_id: str, who: tuple[str, str] = ("app", "ana")
) -> dict[str, Any]:
    return jobs.queue.wait(*who, job_id, timeout_s=10).public()


def test_end_queues_a_job_that_reaches_done(tmp_path: Path) -> None:
    op = Recorder()
    jobs = open_jobs(tmp_path, op)
    try:
        s = jobs.sessions.create_session("app", "ana", "s1")
        jobs.sessions.append_events(s, [user_message("I live in Lyon.")])
        op.gate.clear()  # the worker blocks: the answer must not wait for it
        start = time.perf_counter()
        out = jobs.end_session("app", "ana", "s1")
        assert time.perf_counter() - start < 5 and set(out) == {"session_id", "ended_at", "job_id"}
        assert jobs.get_job("app", "ana", out["job_id"])["status"] in ("queued", "running")
        op.gate.set()
        assert wait_done(jobs, out["job_id"]) == {
            "job_id": out["job_id"],
            "status": "done",
            "memories_added": 2,
            "error": None,
        }
        assert [x.session_id for x in op.sessions] == ["s1"] and op.sessions[0].ended
        waited = jobs.end_session("app", "ana", "s1", wait=True)  # ended: a new job, run here
        assert waited["ingestion"] == {"status": "ingested", "memories_added": 2}
        assert (
            'mnemoray_ingestion_job_duration_seconds_count{status="done"} 2.0'
            in jobs.metrics.render().decode()
        )
    finally:
        jobs.stop()


def test_a_failed_job_reports_and_retries(tmp_path: Path) -> None:
    op = Recorder()
    op.fail = Unavailable("summarizer backend down")
    jobs = open_jobs(tmp_path, op, {"max_attempts": 3, "backoff_s": 0.05})
    try:
        jobs.sessions.create_session("app", "ana", "s1")
        out = jobs.end_session("app", "ana", "s1", wait=True)  # waited for: failed at once
        assert out["ingestion"] == {"status": "failed", "error": "summarizer backend down"}
        job_id = jobs.end_session("app", "ana", "s1")["job_id"]
        assert wait_done(jobs, job_id)["status"] == "failed"
        assert jobs.queue.get("app", "ana", job_id).attempts == 3  # retried with backoff
        assert (
            'mnemoray_session_ingestions_total{status="retried"} 2.0'
            in jobs.metrics.render().decode()
        )
        op.fail = None
        assert jobs.retry_job("app", "ana", job_id)["status"] in ("queued", "running", "done")
        assert wait_done(jobs, job_id)["status"] == "done"
    finally:
        jobs.stop()


def test_message_count_trigger_uses_the_queue(tmp_path: Path) -> None:
    op = Recorder()
    jobs = open_jobs(tmp_path, op, type="message_count", message_count=2)
    try:
        s = jobs.sessions.create_session("app", "ana", "s1")
        jobs.sessions.append_events(
            s, [user_message("I like tea."), model_message("helper", "Noted.")]
        )
        deadline = time.time() + 10
        while not op.sessions and time.time() < deadline:
            time.sleep(0.02)
        assert [x.session_id for x in op.sessions] == ["s1"]
        with jobs.queue._read() as c:
            row = c.execute("SELECT kind, status FROM jobs").fetchall()
        assert row == [("trigger", "done")]
    finally:
        jobs.stop()


def test_a_restart_resumes_unfinished_jobs(tmp_path: Path) -> None:
    op = Recorder()
    settings = parse_settings({"store": str(tmp_path / "store")})
    store = SQLiteSessionStore(settings.sessions_path)
    store.end_session(store.create_session("app", "ana", "s1"))
    left = JobQueue(jobs_path(settings))  # a killed replica left one running, one queued
    running = left.enqueue("app", "ana", "s1", kind="session_end", running=True)
    # ...and died: its heartbeat stopped long ago (a live replica's job is not taken).
    with left._tx() as c:
        c.execute("UPDATE jobs SET heartbeat = heartbeat - 3600")
    queued = left.enqueue(
        "app", "ana", "s2", kind="add_session", payload={"session_id": "s2", "events": []}
    )
    left.close()
    jobs = open_jobs(tmp_path, op)
    try:
        assert wait_done(jobs, running.job_id)["status"] == "done"
        assert wait_done(jobs, queued.job_id)["status"] == "done"
        assert op.sessions[1] == {"session_id": "s2", "events": []}  # the posted input
    finally:
        jobs.stop()


def test_posted_sessions_need_an_id(tmp_path: Path) -> None:
    jobs = open_jobs(tmp_path, Recorder())
    try:
        with pytest.raises(InvalidInput) as exc:
            jobs.enqueue_session("app", "ana", {"events": []})
        assert exc.value.field == "session.session_id"
    finally:
        jobs.stop()


def test_a_job_running_when_its_user_is_forgotten_takes_back_what_it_wrote(tmp_path: Path) -> None:
    class Writes(Recorder):  # add_session answers with the records it wrote
        forgot: list[dict[str, Any]] = []

        def __call__(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
            if op == "forget_memory":
                self.forgot.append(kwargs)
                return 1
            out = super().__call__(op, app_name, user_id, **kwargs)
            return (
                {**out, "memories": [{"memory_id": "m1"}, {"memory_id": "m2"}]}
                if op == "add_session"
                else out
            )

    op = Writes()
    jobs = open_jobs(tmp_path, op)
    try:
        op.gate.clear()  # the worker is inside add_session when the erase lands
        job = jobs.enqueue_session("app", "ana", {"session_id": "s1", "events": []})
        deadline = time.time() + 10
        while (
            jobs.get_job("app", "ana", job["job_id"])["status"] != "running"
            and time.time() < deadline
        ):
            time.sleep(0.02)
        jobs.queue.forget_owner("app", "ana")  # e.g. on another replica
        op.gate.set()
        out = wait_done(jobs, job["job_id"])
        assert (out["status"], out["error"], out["memories_added"]) == ("failed", "forgotten", 0)
        assert [f["memory_id"] for f in op.forgot] == ["m1", "m2"]
    finally:
        jobs.stop()
