"""Recall latency with a time intent, over users with many memories (the time
axis' query-time cost).

The store is serve_bench's (``build_store``: users x 10,000 memories, one an hour over
~14 months, texts from its templates, cached under ``benchmarks/.cache``; the 100K one
by default). Each recall is ``Retriever.search_user`` with the query vector given (the
query embedder is not what is measured), a query never sent before, for a random user.
Per scenario the store is opened afresh, with a new ``Retriever``: each user's
candidate set is built by one recall without a time intent first (untimed: BM25,
entities), so what is timed is the ranking with the time axis, as a server with warm
candidate sets pays it. The first recall with a time intent of each user is listed
apart from the later ones: what it resolves is kept (once only the
records it looked at, with the set; now every record of the set, with its segment,
resolved in the background from that first recall: the later recalls are timed once that
pass is done).
Scenarios:

- ``period``: the question names a period inside the store's history ("what did I do
  last March?", reference time 2025-02-04): ~700 records of it are found by time;
- ``when``: "when ..." questions (records ranked by relevance get the "when" signal);
- ``serve``: serve_bench's own queries, reference time now (periods it names fall
  outside the history: only the records relevance ranks are looked at);
- ``app``: the ``when`` questions app-wide (``Retriever.search_app``: the app's 200
  nearest records by ANN, a transient set per recall; "first" is the first recall).

Each scenario is also run with the time axis off (``weights.time = 0``): the floor.
The time axis' own cost is timed around ``axes.time_signal`` (per later recall, and per
record it looked at).

Run: ``.venv/bin/python benchmarks/recall_latency.py [--queries 200] [--size 100k]``.
Prints a table, writes ``benchmarks/results/recall_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import serve_bench as sb  # noqa: E402
from benchmarks.machine import machine  # noqa: E402
from mnemoray.memory.recall import retriever as retrieval  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "recall_latency.json"
SIZES = {"100k": (10, 10_000), "1m": (100, 10_000)}
IN_HISTORY = sb.BASE_TS + 400 * 86_400.0  # 2025-02-04: "last March" is inside the history
TEMPLATES = {
    "period": (
        "what did I do last {month}",
        "did I cancel the {thing} in {month}",
        "who did I meet in {month}",
        "what happened with the {thing} last {month}",
        "my {thing} in {month}",
    ),
    "when": (
        "when is my {thing} in {city}",
        "when did I book the {thing}",
        "when did {name} visit {city}",
        "when is the {thing} with my {rel}",
        "what day is the {thing}",
    ),
}


def questions(kind: str, n: int, seed: int) -> list[str]:
    if kind == "serve":
        return sb.make_queries(n, seed)
    if kind == "app":  # "when" questions, other ones
        kind, seed = "when", seed + 1
    rng = random.Random(f"{kind}-{seed}")
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen.setdefault(sb._fill(rng.choice(TEMPLATES[kind]), rng)[0] + "?")
    return list(seen)


class TimeAxisClock:
    """Times ``axes.time_signal`` as retrieval calls it: seconds and records looked at."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.looked = 0
        self._inner: Callable[..., np.ndarray] = retrieval.time_signal

    def __call__(self, qt: Any, positions: Any, *args: Any) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self._inner(qt, positions, *args)
        finally:
            self.seconds += time.perf_counter() - start
            self.looked += len(positions)

    def take(self) -> tuple[float, int]:
        out = (self.seconds, self.looked)
        self.seconds, self.looked = 0.0, 0
        return out


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3) if values else float("nan")


def run_scenario(
    store_dir: Path,
    users: int,
    queries: list[str],
    vecs: dict[str, np.ndarray],
    reference: float | None,
    time_on: bool,
    seed: int,
    clock: TimeAxisClock,
    app_wide: bool = False,
) -> dict[str, Any]:
    from mnemoray.memory.store.parquet.store import MemoryStore

    # A store opened afresh: nothing an earlier scenario resolved or built is kept.
    snap = MemoryStore(store_dir).load()
    weights = {} if time_on else {"time": 0.0}
    retriever = retrieval.Retriever(retrieval.RetrievalConfig(weights=weights))
    names = [f"u{u:04d}" for u in range(users)]
    for user in names:  # build each user's candidate set (no time intent)
        retriever.search_user(snap, sb.APP, user, "sourdough baking club", vecs["warm"], sb.TOP_K)
    clock.take()
    rng = random.Random(f"users-{seed}")
    flt = {"reference_time": reference} if reference is not None else None
    first: list[float] = []
    later: list[float] = []
    axis_ms: list[float] = []
    looked: list[int] = []
    seen: set[str] = set()
    for q in queries:
        user = "(app)" if app_wide else rng.choice(names)
        start = time.perf_counter()
        if app_wide:
            retriever.search_app(snap, sb.APP, q, vecs[q], sb.TOP_K, filters=flt)
        else:
            retriever.search_user(snap, sb.APP, user, q, vecs[q], sb.TOP_K, filters=flt)
        ms = (time.perf_counter() - start) * 1e3
        secs, n = clock.take()
        if not app_wide and user not in seen:
            # The set's records resolve in the background from its first time-intent
            # recall: the later recalls below are measured once that is done (a server's
            # steady state), and the background's own time is not counted in them.
            retriever.user_candidates(snap, sb.APP, user).times_resolved()
            clock.take()
        (later if user in seen else first).append(ms)
        if n and user in seen:  # the first recall per user is listed apart, whole
            axis_ms.append(secs * 1e3)
            looked.append(n)
        seen.add(user)
    per_cand = [a / n * 1e3 for a, n in zip(axis_ms, looked, strict=True)]
    return {
        "n": len(queries),
        "first_per_user": {"n": len(first), "p50_ms": pct(first, 50), "max_ms": pct(first, 100)},
        "later": {"n": len(later), "p50_ms": pct(later, 50), "p95_ms": pct(later, 95)},
        "time_axis": {
            "recalls": len(axis_ms),
            "p50_ms": pct(axis_ms, 50),
            "p95_ms": pct(axis_ms, 95),
            "looked_mean": round(float(np.mean(looked)), 1) if looked else 0,
            "us_per_candidate_p50": pct(per_cand, 50),
        },
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        "| scenario | time axis | first recall per user p50 / max | later recalls p50 / "
        "p95 | time axis per later recall p50 / p95 | records looked (mean) | per record |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        for label, r in runs.items():
            f, lt, t = r["first_per_user"], r["later"], r["time_axis"]
            axis = f"{t['p50_ms']:.2f} / {t['p95_ms']:.2f} ms" if t["recalls"] else "-"
            per = f"{t['us_per_candidate_p50']:.1f} us" if t["recalls"] else "-"
            lines.append(
                f"| {name} | {label} | {f['p50_ms']:.1f} / {f['max_ms']:.1f} ms | "
                f"{lt['p50_ms']:.2f} / {lt['p95_ms']:.2f} ms | {axis} | "
                f"{t['looked_mean'] if t['recalls'] else '-'} | {per} |"
            )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="100k")
    p.add_argument("--queries", type=int, default=200, help="recalls per scenario")
    p.add_argument("--scenarios", default="period,when,serve,app")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--note", default="", help="recorded with the results (which code ran)")
    args = p.parse_args()
    from mnemoray.embedders import open_embedder

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    users, per_user = SIZES[args.size]
    pool, pool_vecs, model_id = sb.load_pool(4000, args.seed, log)
    store_dir, info = sb.build_store(
        args.size, users, per_user, pool, pool_vecs, model_id, 0.2, args.seed, log
    )
    embedder = open_embedder("onnx")
    assert embedder is not None
    scenarios = args.scenarios.split(",")
    qs = {s: questions(s, args.queries, args.seed) for s in scenarios}
    texts = ["sourdough baking club", *(q for s in scenarios for q in qs[s])]
    vecs = dict(zip(["warm", *texts[1:]], embedder.encode(texts), strict=True))
    clock = TimeAxisClock()
    retrieval.time_signal = clock  # type: ignore[assignment]  # timed where retrieval calls it
    load_start = os.getloadavg()
    results: dict[str, Any] = {}
    for s in scenarios:
        reference = IN_HISTORY if s == "period" else None
        results[s] = {}
        for label, on in (("on", True), ("off", False)):
            log(f"{s}, time axis {label}: {len(qs[s])} recalls")
            results[s][label] = run_scenario(
                store_dir, users, qs[s], vecs, reference, on, args.seed, clock, app_wide=s == "app"
            )
    out = {
        "benchmark": "recall_latency",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": args.note,
        "machine": machine(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "store": info,
        "config": {
            "size": args.size,
            "queries": args.queries,
            "top_k": sb.TOP_K,
            "seed": args.seed,
            "reference_period": IN_HISTORY,
        },
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(table(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
