"""The driver's serial commit step of a backfill (``backfill_bench.py --commit``).

The driver commits every chunk in archive order, one at a time: whatever it does per
chunk bounds the whole job however many workers prepare chunks. This mode runs the
in-process backfill and the Ray Data pipeline (default config) on the same archive,
each into a fresh store, and reports from the run report: the driver's ``commit`` busy
seconds (and per commit), the workers' ``write`` (prepare) busy seconds, wall seconds
and memories/s. ``--commit-embedder none`` (the default) writes keyword-only memories,
so the embed stage does not hide the commit step on a small CPU machine (on the H100
run the embedder was 7% busy: the serial steps were what was left).

Run: ``.venv/bin/python benchmarks/backfill_bench.py --commit --sessions 2000
--commit-label after --machine-note "..."``: the run is appended to
``benchmarks/results/backfill_commit.json`` (``--out``), so runs of an older checkout
(a ``git worktree`` with ``PYTHONPATH`` set to it) can sit beside it, interleaved.
"""

from __future__ import annotations

import io
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.backfill_bench import CACHE, RESULTS, SUMMARIZER, dataset, start_ray, timed


def _row(engine: str, report: Any, wall: float) -> dict[str, Any]:
    stages = dict(report.stage_seconds)
    commit_s = float(stages.get("commit", 0.0))
    return {
        "engine": engine,
        "seconds": round(float(report.seconds), 3),
        "driver_seconds": round(wall, 3),
        "sessions": report.sessions_read,
        "memories": report.memories_written,
        "commits": report.commits,
        "memories_per_s": round(report.memories_written / float(report.seconds), 1),
        "commit_busy_s": round(commit_s, 3),
        "commit_s_per_commit": round(commit_s / max(1, report.commits), 4),
        "commit_share_of_wall": round(commit_s / float(report.seconds), 3),
        "stage_seconds": stages,
        "stage_cpu_seconds": dict(report.stage_cpu_seconds),
    }


def run_engines(
    archive: Path,
    tmp: Path,
    embedder: str,
    workers: int | None,
) -> list[dict[str, Any]]:
    """The in-process backfill, then the Ray Data pipeline, each into a fresh store."""
    import ray

    from mnemoray.backfill import BackfillConfig, RayOptions, backfill
    from mnemoray.pipeline.backfill import RayDataEngine

    spec = None if embedder == "none" else embedder
    base = {"summarizer": SUMMARIZER, "embedder": spec, "progress_interval_s": 1e9}
    rows = []
    cfg = BackfillConfig(archive=str(archive), store=str(tmp / "inproc"), **base)
    report, wall = timed(lambda: backfill(cfg, stream=io.StringIO(), tty=False))
    rows.append(_row("in_process", report, wall))
    try:
        start_ray()
        opts = RayOptions(workers=workers) if workers else None
        cfg = BackfillConfig(archive=str(archive), store=str(tmp / "ray"), ray=opts, **base)
        report, wall = timed(
            lambda: backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False)
        )
        rows.append(_row("ray_data", report, wall))
    finally:
        if ray.is_initialized():
            ray.shutdown()
    return rows


def _cpu(stages: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in stages.items()) or "-"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| engine | sessions | memories | commits | wall s | memories/s | driver commit "
        "busy s | per commit s | commit / wall | prepare (write) busy s | CPU s by stage |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['sessions']} | {r['memories']} | {r['commits']} | "
            f"{r['seconds']:.1f} | {r['memories_per_s']:.0f} | "
            f"{r['commit_busy_s']:.2f} | {r['commit_s_per_commit']:.3f} | "
            f"{r['commit_share_of_wall']:.0%} | "
            f"{r['stage_seconds'].get('write', 0.0):.2f} | "
            f"{_cpu(r.get('stage_cpu_seconds') or {})} |"
        )
    return "\n".join(lines)


def run(args: Any) -> None:
    archive, meta = dataset(args.sessions, args.sessions_per_file, CACHE)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="backfill-commit-") as tmp:
        rows = run_engines(archive, Path(tmp), args.commit_embedder, args.workers)
    result = {
        "label": args.commit_label,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "note": args.machine_note,
            "load_average_start": load_start,
            "load_average_end": os.getloadavg(),
        },
        "dataset": meta,
        "settings": {
            "summarizer": SUMMARIZER,
            "embedder": args.commit_embedder,
            "workers": args.workers,
        },
        "runs": rows,
    }
    print(table(rows))
    print(f"load average start {load_start}, end {result['machine']['load_average_end']}")
    # Appended: runs of two versions of the code (``--commit-label``), interleaved on a
    # shared machine, compare only beside each other.
    out = args.out or RESULTS / "backfill_commit.json"
    stored = json.loads(out.read_text()) if out.exists() else {"results": []}
    stored["results"].append(result)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(stored, indent=1) + "\n")
    print(f"appended to {out}")
