"""What only the PostgreSQL session store and job queue have to show (the shared
contract runs in test_session_store.py and tests/memory/ingest/test_jobs.py): many
stores, as replicas on many nodes hold, over one database; its migrations; and a server
that is not there."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from mnemoray.errors import ConfigError, Unavailable
from mnemoray.memory.ingest.postgres_queue import PostgresJobQueue
from mnemoray.memory.ingest.worker import JobWorker
from mnemoray.sessions.backends import open_session_store
from mnemoray.sessions.events import user_message
from mnemoray.sessions.postgres.store import PostgresSessionStore
from mnemoray.sessions.types import StaleSessionError
from mnemoray.settings.serve import parse_settings

APP, USER = "travel", "maya"


def test_one_writer_per_round_wins_and_nothing_is_lost(postgres_url: str) -> None:
    writers, rounds = 8, 5
    stores = [PostgresSessionStore(postgres_url, pool_size=1) for _ in range(writers)]
    stores[0].create_session(APP, USER, "s")
    outcomes: list[list[str]] = [[] for _ in range(rounds)]
    try:
        for r in range(rounds):
            copies = [s.get_session(APP, USER, "s") for s in stores]  # all at one version
            start = threading.Barrier(writers)

            def write(
                i: int, r: int = r, copies: list = copies, start: threading.Barrier = start
            ) -> None:
                start.wait()
                try:
                    stores[i].append_event(copies[i], user_message(f"{r}-{i}", id=f"r{r}w{i}"))
                    outcomes[r].append("won")
                except StaleSessionError:
                    outcomes[r].append("stale")

            threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        final = stores[-1].get_session(APP, USER, "s")
    finally:
        for s in stores:
            s.close()
    assert [sorted(o) for o in outcomes] == [["stale"] * (writers - 1) + ["won"]] * rounds
    assert final.version == len(final.events) == rounds  # the winners' events, in order
    assert [e.id[: e.id.index("w")] for e in final.events] == [f"r{r}" for r in range(rounds)]


def test_workers_on_many_queues_run_each_job_once(postgres_url: str) -> None:
    queues = [PostgresJobQueue(postgres_url) for _ in range(4)]
    jobs = [queues[0].enqueue(APP, f"u{i % 5}", f"s{i}", kind="trigger") for i in range(120)]
    ran: list[tuple[str, str]] = []
    lock = threading.Lock()

    def run(queue: PostgresJobQueue):
        def op(job) -> int:
            with lock:
                ran.append((queue.owner, job.job_id))
            return 1

        return op

    workers = [JobWorker(q, run(q)).start() for q in queues]
    try:
        for job in jobs:
            queues[0].wait(APP, job.user_id, job.job_id, timeout_s=30)
    finally:
        for w in workers:
            w.stop()
        for q in queues:
            q.close()
    assert sorted(j for _, j in ran) == sorted(j.job_id for j in jobs)  # each once
    assert len({owner for owner, _ in ran}) > 1  # the work was shared


def test_stores_opening_together_migrate_once(postgres_url: str) -> None:
    opened: list[PostgresSessionStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresSessionStore(postgres_url, pool_size=1))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in opened:
        s.close()
    assert errors == [] and len(opened) == 4
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT component, version FROM mnemoray.schema_versions").fetchall()
    assert rows == [("sessions", 1)]


def test_a_database_newer_than_this_code_is_refused(postgres_url: str) -> None:
    PostgresSessionStore(postgres_url).close()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("UPDATE mnemoray.schema_versions SET version = 99")
    with pytest.raises(ConfigError, match=r"^sessions: the sessions schema is at version 99"):
        PostgresSessionStore(postgres_url)


def test_a_server_that_is_not_there_is_one_clear_line() -> None:
    url = "postgresql://app:s3cret@127.0.0.1:1/memory"  # nothing listens on port 1
    start = time.monotonic()
    with pytest.raises(Unavailable) as raised:
        PostgresSessionStore(url, connect_timeout_s=1)
    assert time.monotonic() - start < 10
    assert str(raised.value) == (
        "sessions: cannot connect to postgresql://***@127.0.0.1:1/memory: connection failed: "
        'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    )


def test_a_postgres_url_is_a_session_and_job_location(postgres_url: str) -> None:
    from mnemoray.http.ingestion import jobs_path

    settings = parse_settings({"store": "/srv/store", "ingestion": {"sessions_db": postgres_url}})
    assert settings.sessions_path == postgres_url == jobs_path(settings)
    store = open_session_store(postgres_url)
    try:
        assert isinstance(store, PostgresSessionStore) and "postgresql://" in repr(store)
    finally:
        store.close()
