"""Sessions and jobs shared by many writers: PostgreSQL beside SQLite, on one machine.

Two figures, each on a real PostgreSQL server this script starts (fsync on, the
defaults a deployment keeps) and on a SQLite file:

- ``optimistic appends``: ``--writers`` stores (one per writer, as replicas hold) take
  the same copy of one session each round and append at once; per round exactly one
  commits and the rest get 409 (StaleSessionError); after ``--rounds`` the session
  holds the winners' events in order, nothing lost. Reports the append latency.
- ``job drain``: ``--jobs`` queued jobs drained by ``--workers`` workers, each on its own
  queue (as replicas on other nodes); each job runs exactly once. Reports jobs/s.

Run: ``.venv/bin/python benchmarks/shared_sessions.py`` (PostgreSQL 15's binaries in
``/usr/lib/postgresql/15/bin``); writes ``benchmarks/results/shared_sessions.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.longconv_bench import commit_info, machine_info  # noqa: E402
from mnemoray.memory.ingest.backends import open_job_queue  # noqa: E402
from mnemoray.memory.ingest.queue import JobQueue  # noqa: E402
from mnemoray.memory.ingest.worker import JobWorker  # noqa: E402
from mnemoray.sessions.backends import open_session_store  # noqa: E402
from mnemoray.sessions.events import user_message  # noqa: E402
from mnemoray.sessions.store import SessionStore  # noqa: E402
from mnemoray.sessions.types import StaleSessionError  # noqa: E402
from tests.support.postgres import LocalPostgres  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "shared_sessions.json"
APP, USER = "bench", "maya"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def optimistic_rounds(open_store: Callable[[], SessionStore], writers: int, rounds: int) -> dict:
    stores = [open_store() for _ in range(writers)]
    stores[0].create_session(APP, USER, "shared")
    per_round: list[Counter[str]] = []
    latencies: list[float] = []
    lock = threading.Lock()
    try:
        for r in range(rounds):
            copies = [s.get_session(APP, USER, "shared") for s in stores]
            start = threading.Barrier(writers)
            outcome: Counter[str] = Counter()

            def write(i: int, r: int = r, copies: list = copies, start=start, outcome=outcome):
                start.wait()
                t = time.perf_counter()
                try:
                    stores[i].append_event(copies[i], user_message(f"{r}-{i}", id=f"r{r}w{i}"))
                    kind = "won"
                except StaleSessionError:
                    kind = "stale"
                with lock:
                    latencies.append((time.perf_counter() - t) * 1000)
                    outcome[kind] += 1

            threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            per_round.append(outcome)
        final = stores[0].get_session(APP, USER, "shared")
    finally:
        for s in stores:
            s.close()
    kept = [e.id.split("w")[0] for e in final.events]
    return {
        "writers": writers,
        "rounds": rounds,
        "rounds_with_one_winner": sum(1 for o in per_round if o["won"] == 1),
        "stale_409": sum(o["stale"] for o in per_round),
        "events_kept": len(final.events),
        "lost_or_extra": abs(len(final.events) - rounds),
        "in_order": kept == [f"r{r}" for r in range(rounds)],
        "append_p50_ms": round(statistics.median(latencies), 2),
        "append_p99_ms": round(pct(latencies, 0.99), 2),
    }


def drain(open_queue: Callable[[], JobQueue], workers: int, jobs: int) -> dict:
    queues = [open_queue() for _ in range(workers)]
    queued = [queues[0].enqueue(APP, f"u{i % 7}", f"s{i}", kind="trigger") for i in range(jobs)]
    runs: Counter[str] = Counter()
    by_worker: Counter[int] = Counter()
    lock = threading.Lock()

    def op_for(w: int) -> Callable[[Any], int]:
        def op(job: Any) -> int:
            with lock:
                runs[job.job_id] += 1
                by_worker[w] += 1
            return 1

        return op

    start = time.perf_counter()
    running = [JobWorker(q, op_for(w), heartbeat_s=1.0).start() for w, q in enumerate(queues)]
    try:
        for job in queued:
            queues[0].wait(APP, job.user_id, job.job_id, timeout_s=120)
        elapsed = time.perf_counter() - start
    finally:
        for w in running:
            w.stop()
        for q in queues:
            q.close()
    return {
        "workers": workers,
        "jobs": jobs,
        "done_once": sum(1 for j in queued if runs[j.job_id] == 1),
        "run_twice_or_more": sum(1 for j in queued if runs[j.job_id] > 1),
        "never_run": sum(1 for j in queued if runs[j.job_id] == 0),
        "per_worker": [by_worker[w] for w in range(workers)],
        "jobs_per_s": round(jobs / elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    server = LocalPostgres(durable=True)
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = server.database()
            locations = {"postgresql": url, "sqlite": tmp}
            for backend, where in locations.items():
                sessions = where if backend == "postgresql" else f"{where}/sessions.db"
                jobs = where if backend == "postgresql" else f"{where}/jobs.db"
                results[backend] = {
                    "optimistic_appends": optimistic_rounds(
                        lambda s=sessions: open_session_store(s), args.writers, args.rounds
                    ),
                    "job_drain": drain(lambda j=jobs: open_job_queue(j), args.workers, args.jobs),
                }
    finally:
        server.stop()
    print(
        f"{'backend':<11} {'rounds 1 winner':>16} {'409s':>5} {'lost':>5} "
        f"{'append p50':>11} {'p99':>8} | {'jobs once':>10} {'dups':>5} {'jobs/s':>7}"
    )
    for backend, r in results.items():
        a, d = r["optimistic_appends"], r["job_drain"]
        print(
            f"{backend:<11} {a['rounds_with_one_winner']:>9}/{a['rounds']:<6} {a['stale_409']:>5} "
            f"{a['lost_or_extra']:>5} {a['append_p50_ms']:>8.2f} ms {a['append_p99_ms']:>5.1f} ms"
            f" | {d['done_once']:>6}/{d['jobs']:<3} {d['run_twice_or_more']:>5} "
            f"{d['jobs_per_s']:>7}"
        )
    out = {
        "machine": machine_info(),
        "commit": commit_info(),
        "args": vars(args) | {"out": None},
        "results": results,
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
