"""The live agent loop over HTTP, on a real server: what an agent waits for.

    python benchmarks/live_loop.py [--sessions 30] [--events 40]

- ``ingestion``: on an idle server, each of ``--sessions`` sessions of ``--events``
  message events is ended with ``POST /v1/sessions/{id}:end``. The answer (202 with a
  job id: the session is on disk, its ingestion queued) is timed, then the time until
  ``GET /v1/jobs/{id}`` says ``done``; then as many sessions are ended with
  ``?wait=true`` (the synchronous answer, after distillation and embedding). Finally
  every session's facts must be recallable.
- ``compaction``: sessions created with a ``compaction`` policy get ``--turns`` short
  messages in batches; append latency, the time until the first compaction event is
  listed, and the compiled context's ``total_tokens`` against the threshold.

Prints a table and writes ``benchmarks/results/live_loop.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script
from benchmarks.serve_process import Server  # noqa: E402
from mnemoray.tokens import count_tokens  # noqa: E402

RESULTS = HERE / "results" / "live_loop.json"
STABLE_S = 1.0  # no new compaction for this long: the session has settled
APP = "live"
WHO = {"app_name": APP, "user_id": "u1"}
HOBBIES = (
    "parrot",
    "Madrid",
    "marathon",
    "sourdough",
    "violin",
    "Kyoto",
    "chess",
    "tulips",
    "kayak",
    "espresso",
    "lighthouse",
    "origami",
    "glacier",
    "saxophone",
    "cactus",
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def stats_ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50_ms": round(1000 * statistics.median(ordered), 1),
        # Nearest rank: never below the median, also for a handful of samples.
        "p95_ms": round(1000 * ordered[math.ceil(0.95 * len(ordered)) - 1], 1),
        "max_ms": round(1000 * ordered[-1], 1),
    }


def conversation(i: int, n: int) -> list[dict[str, Any]]:
    hobby = HOBBIES[i % len(HOBBIES)]
    events = [
        {
            "author": "user",
            "role": "user",
            "text": f"My favourite hobby is {hobby} and my code word is kw{i}.",
        },
        {"author": "agent", "role": "model", "text": f"Noted: {hobby}, kw{i}."},
    ]
    for k in range(len(events), n):
        role = "user" if k % 2 == 0 else "model"
        events.append(
            {
                "author": "user" if role == "user" else "agent",
                "role": role,
                "text": f"turn {k} of session {i}: small talk about the weather",
            }
        )
    return events


def wait_for(what: Callable[[], bool], timeout_s: float) -> float | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if what():
            return time.perf_counter() - t0
        time.sleep(0.02)
    return None


def run_ingestion(c: httpx.Client, sessions: int, events: int) -> dict[str, Any]:
    def create(sid: str, i: int) -> None:
        c.post("/v1/sessions", json={**WHO, "session_id": sid}).raise_for_status()
        c.post(
            f"/v1/sessions/{sid}/events", json={**WHO, "events": conversation(i, events)}
        ).raise_for_status()

    accepted, done_after, sync = [], [], []
    for i in range(sessions):
        sid = f"bg{i}"
        create(sid, i)
        t0 = time.perf_counter()
        r = c.post(f"/v1/sessions/{sid}:end", json=WHO)
        accepted.append(time.perf_counter() - t0)
        if r.status_code != 202:
            raise RuntimeError(f":end answered {r.status_code}: {r.text}")
        job = r.json()["job_id"]

        def finished(job: str = job) -> bool:
            status = c.get(f"/v1/jobs/{job}", params=WHO).json()["status"]
            if status == "failed":
                raise RuntimeError(f"job {job} failed")
            return status == "done"

        took = wait_for(finished, 120)
        if took is None:
            raise RuntimeError(f"job {job} not done after 120 s")
        done_after.append(time.perf_counter() - t0)
        time.sleep(0.2)  # idle again: the figure is the idle-server 202
    for i in range(sessions, 2 * sessions):
        sid = f"sync{i}"
        create(sid, i)
        t0 = time.perf_counter()
        r = c.post(f"/v1/sessions/{sid}:end", params={"wait": "true"}, json=WHO)
        sync.append(time.perf_counter() - t0)
        if r.status_code != 200:
            raise RuntimeError(f":end?wait=true answered {r.status_code}: {r.text}")
    found, missing = 0, []
    for i in range(2 * sessions):
        r = c.post("/v1/recall", json={**WHO, "query": f"code word kw{i}", "top_k": 5})
        hit = any(f"kw{i}" in m["text"] for m in r.json()["memories"])
        found += hit
        if not hit:
            missing.append(i)
    out = {
        "sessions": sessions,
        "events_per_session": events,
        "end_202": stats_ms(accepted),
        "end_to_job_done": stats_ms(done_after),
        "end_wait_true_200": stats_ms(sync),
        "recallable": f"{found}/{2 * sessions}",
        "not_recalled": missing,
    }
    log(
        f"ingestion: 202 p50 {out['end_202']['p50_ms']} ms, job done p50 "
        f"{out['end_to_job_done']['p50_ms']} ms, ?wait=true p50 "
        f"{out['end_wait_true_200']['p50_ms']} ms, recallable {out['recallable']}"
    )
    return out


def run_compaction(
    c: httpx.Client, sessions: int, turns: int, threshold: int, keep_last: int, batch: int = 50
) -> dict[str, Any]:
    policy = {"token_threshold": threshold, "keep_last": keep_last}
    appends, settle, compiled, covered, events_total = [], [], [], [], []
    for i in range(sessions):
        sid = f"cmp{i}"
        c.post(
            "/v1/sessions", json={**WHO, "session_id": sid, "compaction": policy}
        ).raise_for_status()
        msgs = [
            {
                "author": "user" if k % 2 == 0 else "agent",
                "role": "user" if k % 2 == 0 else "model",
                "text": f"message {k}: {HOBBIES[k % len(HOBBIES)]} plans for day {k // 2}",
            }
            for k in range(turns)
        ]
        for start in range(0, turns, batch):
            t0 = time.perf_counter()
            c.post(
                f"/v1/sessions/{sid}/events", json={**WHO, "events": msgs[start : start + batch]}
            ).raise_for_status()
            appends.append(time.perf_counter() - t0)
        last = time.perf_counter()
        # Settled: compactions exist and none has landed for STABLE_S; the settle time
        # is when the last one was first seen.
        seen: list[tuple[int, float]] = []
        while time.perf_counter() - last < 60:
            got = c.get(f"/v1/sessions/{sid}", params=WHO).json()["events"]
            comps = [e for e in got if e["type"] == "compaction"]
            now = time.perf_counter()
            if not seen or seen[-1][0] != len(comps):
                seen.append((len(comps), now))
            if comps and now - seen[-1][1] >= STABLE_S:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"session {sid}: compaction not settled after 60 s")
        ids = {x for e in comps for x in e["data"]["source_event_ids"]}
        settle.append(seen[-1][1] - last)
        covered.append(len(ids))
        events_total.append(len(got))
        r = c.post(
            "/v1/context:compile",
            json={
                **WHO,
                "session_id": sid,
                "agent": {"name": "planner"},
                "new_message": "What did we plan?",
            },
        )
        r.raise_for_status()
        compiled.append(r.json()["total_tokens"])
    out = {
        "sessions": sessions,
        "turns": turns,
        "policy": policy,
        "append_batch": batch,
        "append": stats_ms(appends),
        "last_append_to_settled": stats_ms(settle),
        "events_covered_median": statistics.median(covered),
        "events_listed_median": statistics.median(events_total),
        # The same history uncompacted: every message's text (mnemoray.tokens).
        "raw_history_tokens": sum(count_tokens(m["text"]) for m in msgs),
        "compiled_total_tokens_max": max(compiled),
        "compiled_total_tokens_median": statistics.median(compiled),
    }
    log(
        f"compaction: append p50 {out['append']['p50_ms']} ms, settled p50 "
        f"{out['last_append_to_settled']['p50_ms']} ms after the last append, compiled "
        f"tokens max {out['compiled_total_tokens_max']} (threshold {threshold})"
    )
    return out


def table(results: dict[str, Any]) -> str:
    rows = [("measure", "n", "p50 ms", "p95 ms", "max ms")]
    ing = results.get("ingestion")
    if ing:
        for name in ("end_202", "end_to_job_done", "end_wait_true_200"):
            s = ing[name]
            rows.append((name, str(s["n"]), str(s["p50_ms"]), str(s["p95_ms"]), str(s["max_ms"])))
    cmp = results.get("compaction")
    if cmp:
        for name in ("append", "last_append_to_settled"):
            s = cmp[name]
            rows.append(
                (
                    f"compaction {name}",
                    str(s["n"]),
                    str(s["p50_ms"]),
                    str(s["p95_ms"]),
                    str(s["max_ms"]),
                )
            )
    width = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, width, strict=True)) for r in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=30)
    p.add_argument("--events", type=int, default=40)
    p.add_argument("--compaction-sessions", type=int, default=5)
    p.add_argument("--turns", type=int, default=300)
    p.add_argument("--threshold", type=int, default=2000)
    p.add_argument(
        "--keep-last", type=int, default=5, help="newest invocations kept raw (2 messages each)"
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    with tempfile.TemporaryDirectory(prefix="live-loop-") as tmp:
        work = Path(tmp)
        server = Server(work / "store", {}, {}, work / "server.log")
        log(f"server ready in {server.wait_ready(600):.1f} s (port {server.port})")
        try:
            with httpx.Client(base_url=server.base, timeout=120) as c:
                results["ingestion"] = run_ingestion(c, args.sessions, args.events)
                results["compaction"] = run_compaction(
                    c, args.compaction_sessions, args.turns, args.threshold, args.keep_last
                )
        finally:
            server.stop()
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
