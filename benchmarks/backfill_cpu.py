"""CPU per memory of a backfill outside the embedder.

On one GPU, 10,000 memories/s leaves the rest of the pipeline (read, validate, distill
with its entity-graph reading, the graph merge and segment writes of ``prepare``, the
driver's commit) about 1.4 ms of CPU per memory on 14 cores. This measures that cost
where nothing else hides it: the in-process backfill (``--in-process``) of generated
sessions with the extractive summarizer into a keyword-only store (``--embedder none``),
``--repeats`` times, each into a fresh store. CPU is this process's clock
(``time.process_time``); per stage, the run report's ``stage_cpu_seconds`` where the code
has them, else its wall ``stage_seconds``.

``--heavy-user N``: instead, the entity-graph merge of ONE user's N sessions (the prepare
step's ``merged_graph``, in time order), CPU per session at N/4, N/2 and N sessions: a
cost per session that grows with the user's graph is quadratic in a long-lived user.

Runs are appended to ``benchmarks/results/backfill_cpu.json`` under ``--label``, so an
older checkout can run beside it, interleaved (``PYTHONPATH=<worktree> python
benchmarks/backfill_cpu.py --label before``).

    .venv/bin/python -m benchmarks.backfill_cpu --sessions 2000 --repeats 3 --label after
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.backfill_bench import CACHE, SUMMARIZER, dataset
from benchmarks.records_bench import append_result

RESULTS = Path(__file__).resolve().parent / "results"


def one_run(archive: Path, store: Path) -> dict[str, Any]:
    from mnemoray.backfill import BackfillConfig, backfill

    cfg = BackfillConfig(
        archive=str(archive),
        store=str(store),
        summarizer=SUMMARIZER,
        embedder=None,
        progress_interval_s=1e9,
    )
    wall0, cpu0 = time.perf_counter(), time.process_time()
    report = backfill(cfg, stream=io.StringIO(), tty=False)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    stages = getattr(report, "stage_cpu_seconds", None) or {}
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "memories": report.memories_written,
        "sessions": report.sessions_read,
        "cpu_ms_per_memory": round(1000 * cpu / report.memories_written, 4),
        "stage_clock": "cpu" if stages else "wall",
        "stages": {k: round(v, 3) for k, v in (stages or report.stage_seconds).items()},
    }


def heavy_user(sessions: int) -> list[dict[str, Any]]:
    from benchmarks.datagen import DatasetConfig, generate
    from mnemoray.graph.extract import extract_session
    from mnemoray.memory.records.distill import distill_session
    from mnemoray.memory.store.graph.commit import merged_graph
    from mnemoray.summarizers import get_summarizer

    data = generate(DatasetConfig(users=1, sessions_per_user=sessions)).sessions
    summarizer = get_summarizer(SUMMARIZER)
    extracts = [extract_session(s, distill_session(s, summarizer)) for s in data]
    app, user = data[0].app_name, data[0].user_id
    out = []
    for n in sorted({max(1, sessions // 4), max(1, sessions // 2), sessions}):
        cpu0 = time.process_time()
        graph = merged_graph(app, user, None, extracts[:n])
        cpu = time.process_time() - cpu0
        out.append(
            {
                "sessions": n,
                "cpu_s": round(cpu, 4),
                "cpu_ms_per_session": round(1000 * cpu / n, 4),
                "relations": len(graph.relations),
                "entities": len(graph.entities),
            }
        )
    return out


def table(label: str, runs: list[dict[str, Any]]) -> str:
    lines = [
        "| label | memories | wall s | CPU s | CPU ms / memory | per stage (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in runs:
        stages = ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
        lines.append(
            f"| {label} | {r['memories']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
            f"{r['cpu_ms_per_memory']:.3f} | {r['stage_clock']}: {stages} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sessions", type=int, default=2000)
    p.add_argument("--sessions-per-file", type=int, default=250)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--label", default="")
    p.add_argument("--machine-note", default="")
    p.add_argument(
        "--heavy-user",
        type=int,
        default=0,
        metavar="N",
        help="the graph merge of one user's N sessions instead",
    )
    p.add_argument("--out", type=Path, default=RESULTS / "backfill_cpu.json")
    args = p.parse_args(argv)
    load_start = os.getloadavg()
    result: dict[str, Any] = {"label": args.label}
    if args.heavy_user:
        merges = heavy_user(args.heavy_user)
        result["heavy_user"] = merges
        print("| label | sessions | CPU s | CPU ms / session | relations |\n|---|---|---|---|---|")
        for r in merges:
            print(
                f"| {args.label} | {r['sessions']} | {r['cpu_s']:.3f} | "
                f"{r['cpu_ms_per_session']:.2f} | {r['relations']} |"
            )
    else:
        archive, meta = dataset(args.sessions, args.sessions_per_file, CACHE)
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="backfill-cpu-") as tmp:
                runs.append(one_run(archive, Path(tmp) / "store"))
        best = min(r["cpu_ms_per_memory"] for r in runs)
        result.update({"dataset": meta, "runs": runs, "best_cpu_ms_per_memory": best})
        print(table(args.label, runs))
        print(f"best {best:.3f} CPU ms / memory")
    result["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "note": args.machine_note,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
    }
    print(f"load average start {load_start}, end {result['machine']['load_average_end']}")
    append_result(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
