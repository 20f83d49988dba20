"""The reliability suite's long runs: kills, hostile input, corrupt stores, load.

    python benchmarks/reliability.py [--quick] [--parts serve,slow,store,backfill,writes]

- ``serve``: a real server (API keys on) takes writes from several clients and is
  SIGKILLed mid-write, whole process tree, then restarted, ``--rounds`` times: every
  acknowledged memory and event must be served afterwards, once and in order. Then
  ~1,000 hostile requests (``benchmarks.hostile_requests``): 0 answers 5xx wanted.
  Then ``--clients`` clients for ``--load-s`` seconds: errors and resident memory.
- ``slow``: a real server (its default limits) and ``--slow-sockets`` connections from
  one address for each of ``benchmarks.hostile_requests.slow_clients`` (nothing sent,
  headers a byte at a time, a stalled body, a trickled body), watched for up to
  ``--slow-limit-s``: how many were refused, answered 408 or closed and when, and
  whether an honest client on another address (and one on the same) was served.
- ``store``: a backfilled store is damaged in each known way (missing or corrupt
  manifest, truncated segment, lost index, lost ledger, ...): every case must be
  detected (no wrong data served), ``mnemoray doctor`` must name it and
  ``doctor --repair`` bring the store back to serving what a clean store serves.
- ``backfill``: a Ray Data backfill is SIGKILLed (driver, then the whole local Ray)
  after 10%, 30% and 60% of its commits and re-run: the store must serve exactly
  what a clean run serves, and the killed runs' commits must not be redone.
- ``writes``: one tenant's large write (a synchronous add at the embedding cap, one
  over it, a long queued session) while another tenant adds one memory at a time: the
  small adds' latency beside the same adds alone (``benchmarks.reliability_writes``).

Prints a table and writes ``benchmarks/results/reliability.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script
from benchmarks import reliability_serve  # noqa: E402

RESULTS = HERE / "results" / "reliability.json"
PARTS = ("serve", "slow", "store", "backfill", "writes")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_serve(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    acked, server = reliability_serve.acked_writes(
        work / "store", work, log, writers=args.writers, write_s=args.write_s, rounds=args.rounds
    )
    try:
        hostile = reliability_serve.hostile_input(server, log)
        load = reliability_serve.load_held(server, log, clients=args.clients, seconds=args.load_s)
    finally:
        server.stop()
    return {"acked_writes": acked, "hostile_input": hostile, "load": load}


def run_slow(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server = reliability_serve.start(work / "store", work, log)
    try:
        return reliability_serve.slow_clients(
            server, log, sockets=args.slow_sockets, limit_s=args.slow_limit_s
        )
    finally:
        server.stop()


def run_store(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from benchmarks import reliability_store

    return reliability_store.corrupt_cases(work, log, sessions=args.sessions)


def run_backfill(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from benchmarks import reliability_store

    return reliability_store.backfill_kills(work, log, sessions=args.backfill_sessions)


def run_writes(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from benchmarks import reliability_writes

    server = reliability_serve.start(work / "store", work, log)
    try:
        return reliability_writes.contention(server, log)
    finally:
        server.stop()


def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str]] = []
    serve = results.get("serve")
    if serve:
        a, h, ld = serve["acked_writes"], serve["hostile_input"], serve["load"]
        rows += [
            (
                "SIGKILL whole server mid-write",
                f"{a['rounds']} rounds x {a['writers']} writers",
                f"{a['memories_acked_served']}/{a['memories_acked']} memories, "
                f"{a['events_acked_served']}/{a['events_acked']} events acked served "
                f"({a['acked_served_pct']}%)",
            ),
            (
                "  duplicates / out of order",
                "",
                f"{a['memory_duplicates']} + {a['event_duplicates']} / {a['events_out_of_order']}",
            ),
            (
                "  unacknowledged served",
                "",
                f"{a['memories_unacked_served']}/{a['memories_unacked']} (in flight at the kill)",
            ),
            (
                "hostile requests",
                f"{h['requests']}",
                f"{h['by_class']}, 5xx: {h['five_xx']}, after: "
                f"{'all 200' if h['after_ok'] else h['after']}",
            ),
            (
                "load held",
                f"{ld['clients']} clients x {ld['seconds']:.0f} s",
                f"{ld['requests']} requests, {ld['errors']} errors, RSS {ld['rss_start_mib']} -> "
                f"{ld['rss_end_mib']} MiB (2nd half {ld['rss_growth_second_half_mib']:+} MiB)",
            ),
        ]
    for name, case in (results.get("slow") or {}).get("cases", {}).items():
        timed = case["closed_by_timeout_s"]
        when = f" after {timed['first']}-{timed['last']} s" if timed["first"] is not None else ""
        rows.append(
            (
                f"slow clients: {name}",
                f"{case['sockets']} sockets, one address",
                f"{case['refused_503']} refused at once, {case['answered_408']} 408 + "
                f"{case['closed_silently']} closed{when}, "
                f"{case['still_open']} open at {case['watched_s']} s",
            )
        )
        for who in ("other_address", "same_address"):
            h = case[who]
            rows.append(
                (
                    f"  recall from the {who.replace('_', ' ')}",
                    f"{h['requests']} requests",
                    f"{h['statuses']}"
                    + (
                        f", 200 p50 {h['ok_p50_ms']} ms, max {h['ok_max_ms']} ms"
                        if h["ok_p50_ms"]
                        else ""
                    ),
                )
            )
    for name, case in (results.get("store") or {}).get("cases", {}).items():
        rows.append(
            (f"corrupt store: {name}", case.get("detected_by", ""), case.get("outcome", ""))
        )
    for name, run in (results.get("backfill") or {}).get("kills", {}).items():
        rows.append(
            (f"backfill SIGKILL {name}", run.get("killed_after", ""), run.get("outcome", ""))
        )
    writes = results.get("writes")
    if writes:
        alone = writes["small_alone"]
        rows.append(
            (
                "small add alone (tenant 2)",
                "",
                f"p50 {alone['p50_ms']} ms, max {alone['max_ms']} ms",
            )
        )
        for name, case in writes["cases"].items():
            rows.append(
                (
                    f"small add beside {name}",
                    f"large: {case['large_status']} in {case['large_s']} s",
                    f"{case['small_adds']} adds, p50 {case['small_p50_ms']} ms, "
                    f"max {case['small_max_ms']} ms",
                )
            )
        rows.append(("  server RSS", "", " -> ".join(f"{m} MiB" for m in writes["rss_mib"])))
    width = [max(len(r[i]) for r in rows) if rows else 0 for i in range(3)]
    lines = ("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)) for r in rows)
    return "\n".join(line.rstrip() for line in lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short runs (minutes)")
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--writers", type=int, default=6)
    p.add_argument("--write-s", type=float, default=None, help="writes before each kill")
    p.add_argument("--rounds", type=int, default=None, help="kill + restart rounds")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--load-s", type=float, default=None)
    p.add_argument("--slow-sockets", type=int, default=120, help="connections per slow case")
    p.add_argument("--slow-limit-s", type=float, default=90.0, help="longest watch per case")
    p.add_argument("--sessions", type=int, default=40, help="sessions of the damaged store")
    p.add_argument("--backfill-sessions", type=int, default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    args.write_s = args.write_s or (8.0 if args.quick else 20.0)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.load_s = args.load_s or (20.0 if args.quick else 60.0)
    args.backfill_sessions = args.backfill_sessions or (120 if args.quick else 400)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parts = [x for x in args.parts.split(",") if x]
    unknown = set(parts) - set(PARTS)
    if unknown:
        p.error(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")
    runners = {
        "serve": run_serve,
        "slow": run_slow,
        "store": run_store,
        "backfill": run_backfill,
        "writes": run_writes,
    }
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "quick": args.quick,
    }
    with tempfile.TemporaryDirectory(prefix="mnemoray-rel-") as tmp:
        for part in parts:
            work = Path(tmp) / part
            work.mkdir()
            t0 = time.perf_counter()
            results[part] = runners[part](args, work)
            results[part]["seconds"] = round(time.perf_counter() - t0, 1)
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
