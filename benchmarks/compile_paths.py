"""The latency target's setting for ``compile_bench.py``: one session at exactly N
events compiled on three paths, each compile's time split by where it went.

- warm: the same session object every time (an in-process agent);
- cold: fresh event objects every time (a server loading the session from its store);
- empty_cache: fresh objects and every compiler cache emptied first (a process that
  never rendered these events; the token counter's memo of texts is kept);
- memo_empty: as empty_cache, with the token counter's memo emptied too (a first compile
  in a fresh process, its imports and code already loaded).

Per path: wall-clock p50/p95, CPU-time p50/p95 (the compiling thread's own time:
on a shared machine the wall clock also counts time the thread waited for a core),
the garbage collector's time inside the timed compiles, and the mean time per
compiler step from the request's trace (the cacheable-prefix count is its last
entry, ``cacheable_prefix``); ``build`` is the rest (the compiler loop, the system
instruction, hashes).
"""

from __future__ import annotations

import copy
import gc
import time
from collections import defaultdict
from typing import Any

from benchmarks.machine import machine
from mnemoray import tokens
from mnemoray.compiler import AgentSpec, Compiler
from mnemoray.compiler.history_memo import clear_caches
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session

PATHS = ("warm", "cold", "empty_cache", "memo_empty")
LABELS = {
    "warm": "warm",
    "cold": "cold",
    "empty_cache": "cold, empty render cache",
    "memo_empty": "  and token memo emptied",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class GcTimer:
    """Time the collector spends while ``active`` (gc.callbacks, start/stop pairs)."""

    def __init__(self) -> None:
        self.active = False
        self.ns = 0
        self._start = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        elif self.active:
            self.ns += time.perf_counter_ns() - self._start


def measure_path(
    path: str, compiler: Compiler, agent: AgentSpec, session: Session, message: str, repeats: int
) -> dict[str, Any]:
    raw = [e.to_dict() for e in session.events]
    wall: list[float] = []
    cpu: list[float] = []
    steps: dict[str, int] = defaultdict(int)
    timer = GcTimer()
    gc.callbacks.append(timer)
    try:
        for _ in range(repeats):
            target = session
            if path != "warm":
                target = copy.copy(session)
                target.events = [Event.from_dict(e) for e in raw]
            if path in ("empty_cache", "memo_empty"):
                clear_caches()
            if path == "memo_empty":
                tokens._count_memoised.cache_clear()
            timer.active = True
            cpu_start, start = time.thread_time_ns(), time.perf_counter_ns()
            request = compiler.compile(target, agent, new_message=message)
            elapsed, cpu_ns = time.perf_counter_ns() - start, time.thread_time_ns() - cpu_start
            timer.active = False
            wall.append(elapsed / 1e6)
            cpu.append(cpu_ns / 1e6)
            in_steps = 0
            for step in request.trace:
                steps[step.name] += step.micros
                in_steps += step.micros
            steps["build"] += max(0, elapsed // 1000 - in_steps)
    finally:
        gc.callbacks.remove(timer)
    return {
        "p50_ms": percentile(wall, 50),
        "p95_ms": percentile(wall, 95),
        "cpu_p50_ms": percentile(cpu, 50),
        "cpu_p95_ms": percentile(cpu, 95),
        "gc_ms_per_compile": timer.ns / 1e6 / repeats,
        "steps_us": {k: round(v / repeats, 1) for k, v in steps.items()},
    }


def at_event_count(
    session: Session, count: int, compiler: Compiler, agent: AgentSpec, repeats: dict[str, int]
) -> dict[str, Any]:
    """``session`` cut at exactly ``count`` events, measured on every path."""
    cut = copy.copy(session)
    cut.events = session.events[:count]
    message = "Where is my order?"
    compiler.compile(cut, agent, new_message=message)  # the warm path starts warm
    return {
        "events": count,
        "machine": machine(),
        **{
            path: measure_path(path, compiler, agent, cut, message, repeats[path]) for path in PATHS
        },
    }


def print_paths(result: dict[str, Any], before: dict[str, Any] | None = None) -> None:
    """The table: one row per path; ``before`` (an earlier result) adds its p95s."""
    m = result["machine"]
    print(
        f"at exactly {result['events']} events on {m['cpu_model']} ({m['cpus']} cores, "
        f"load {m['loadavg'][0]:.1f}):"
    )
    head = f"  {'path':<25} {'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} {'cpu p95':>7} {'gc ms':>6}"
    print(head + ("  before p95" if before else ""))
    for path in PATHS:
        r = result[path]
        row = (
            f"  {LABELS[path]:<25} {r['p50_ms']:7.2f} {r['p95_ms']:7.2f} "
            f"{r['cpu_p50_ms']:7.2f} {r['cpu_p95_ms']:7.2f} {r['gc_ms_per_compile']:6.2f}"
        )
        if before and path in before:
            row += f"  {before[path]['p95_ms']:10.2f}"
        print(row)
    print("  mean us per compile, by step:")
    for path in PATHS:
        steps = sorted(result[path]["steps_us"].items(), key=lambda kv: -kv[1])
        print(f"    {path:<12} " + ", ".join(f"{k} {v:.0f}" for k, v in steps if v >= 1))
