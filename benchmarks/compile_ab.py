"""Before/after for the context compiler on a loaded machine: two checkouts, one
worker process each, compiling the latency target's session (``compile_bench.py``:
the first 1000 events of the 1000-turn session) in small batches taken in turn.

On a shared machine the load changes from second to second; runs of the whole
benchmark back to back differ by more than a 20% change. Batches of ten compiles
alternating between the two workers (the order swapped every round) see the same
load, so their percentiles compare. Per compile: the thread's CPU time (the compile's
own cost) and the wall clock. Paths (see ``compile_paths``): warm, cold, empty_cache
(compiler caches emptied), memo_empty (the token counter's memo emptied too).

Run: ``.venv/bin/python benchmarks/compile_ab.py --before /tmp/old-checkout`` (the
other checkout defaults to this one) -> table, and ``results/compile_ab.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("warm", "cold", "empty_cache", "memo_empty")
RESULTS = ROOT / "benchmarks" / "results" / "compile_ab.json"


def worker() -> None:
    """Answer ``PATH N`` lines with the CPU and wall ms of N compiles (JSON). Imports
    only what every checkout has, from the checkout on the import path."""
    sys.path.insert(0, os.getcwd())
    from benchmarks.compile_bench import INSTRUCTION, STATIC, TOOLS, build_session
    from mnemoray import tokens
    from mnemoray.compiler import AgentSpec, Compiler
    from mnemoray.compiler.history_memo import clear_caches
    from mnemoray.sessions.events import Event

    full, _ = build_session(1000, compaction=False)
    cut = copy.copy(full)
    cut.events = full.events[:1000]
    compiler = Compiler.default()
    agent = AgentSpec(
        name="atlas",
        description="Customer-operations assistant",
        static_instruction=STATIC,
        instruction=INSTRUCTION,
        tools=TOOLS,
    )
    raw = [e.to_dict() for e in cut.events]
    message = "Where is my order?"
    print("ready", flush=True)
    for line in sys.stdin:
        path, count = line.split()
        out = []
        for _ in range(int(count)):
            target = cut
            if path != "warm":
                target = copy.copy(cut)
                target.events = [Event.from_dict(e) for e in raw]
            if path in ("empty_cache", "memo_empty"):
                clear_caches()
            if path == "memo_empty":
                tokens._count_memoised.cache_clear()
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            compiler.compile(target, agent, new_message=message)
            out.append(((time.thread_time_ns() - cpu) / 1e6, (time.perf_counter_ns() - wall) / 1e6))
        if path != "warm":  # the next warm batch finds the kept session object's snapshot
            clear_caches()
            compiler.compile(cut, agent, new_message=message)
        print(json.dumps(out), flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def start(checkout: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--worker"],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if ask(proc, None) != "ready":
        raise RuntimeError(f"the worker in {checkout} did not start")
    return proc


def ask(proc: subprocess.Popen[str], line: str | None) -> str:
    """Send ``line`` (if any) to the worker and return its answer."""
    assert proc.stdin is not None and proc.stdout is not None
    if line is not None:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
    return proc.stdout.readline().strip()


def compare(
    checkouts: dict[str, Path], paths: list[str], rounds: int, batch: int
) -> dict[str, Any]:
    from benchmarks.machine import machine

    procs = {label: start(path) for label, path in checkouts.items()}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {
        (label, path): [] for label in checkouts for path in paths
    }
    before = machine()
    try:
        for r in range(rounds):
            for path in paths:
                order = list(procs) if r % 2 == 0 else list(procs)[::-1]
                for label in order:
                    times[label, path] += json.loads(ask(procs[label], f"{path} {batch}"))
    finally:
        for proc in procs.values():
            proc.communicate()  # closes its input: the worker's loop ends
    summary: dict[str, Any] = {}
    for (label, path), pairs in times.items():
        cpu, wall = [c for c, _ in pairs], [w for _, w in pairs]
        summary.setdefault(path, {})[label] = {
            "n": len(pairs),
            "cpu_p50_ms": percentile(cpu, 50),
            "cpu_p95_ms": percentile(cpu, 95),
            "wall_p50_ms": percentile(wall, 50),
            "wall_p95_ms": percentile(wall, 95),
        }
    return {
        "machine": before,
        "loadavg_end": machine()["loadavg"],
        "rounds": rounds,
        "batch": batch,
        "checkouts": {k: str(v) for k, v in checkouts.items()},
        "paths": summary,
    }


def print_table(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(
        f"{m['cpu_model']} ({m['cpus']} cores), load {m['loadavg'][0]:.1f} -> "
        f"{result['loadavg_end'][0]:.1f}; {result['rounds']} rounds x {result['batch']} "
        f"compiles per checkout and path"
    )
    print(
        f"  {'path':<12} {'checkout':<8} {'cpu p50':>8} {'cpu p95':>8} {'wall p50':>9} "
        f"{'wall p95':>9}"
    )
    for path, by in result["paths"].items():
        for label, r in by.items():
            print(
                f"  {path:<12} {label:<8} {r['cpu_p50_ms']:8.2f} {r['cpu_p95_ms']:8.2f} "
                f"{r['wall_p50_ms']:9.2f} {r['wall_p95_ms']:9.2f}"
            )
        if {"before", "after"} <= by.keys():
            b, a = by["before"], by["after"]
            print(
                f"  {'':<12} {'ratio':<8} {b['cpu_p50_ms'] / a['cpu_p50_ms']:7.2f}x "
                f"{b['cpu_p95_ms'] / a['cpu_p95_ms']:7.2f}x"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return
    if args.before is None:
        parser.error("--before is required")
    sys.path.insert(0, str(ROOT))
    result = compare(
        {"before": args.before.resolve(), "after": args.after.resolve()},
        args.paths.split(","),
        args.rounds,
        args.batch,
    )
    print_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
