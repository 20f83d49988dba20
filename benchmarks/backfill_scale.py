"""Backfill at scale: the GPU pipeline beside the GPU's limit, and CPU scaling over cores.

``backfill_bench.py --device cuda`` runs :func:`gpu` and ``backfill_bench.py --cores
2,4,8,16`` runs :func:`cores` (both may be given). Same generated archive as
``backfill_bench.py``, default ``extractive`` summarizer.

- **GPU** (one run each, same texts): the limit probe over exactly the ``key_text`` of
  every memory the backfill writes (pre-tokenised, on the GPU, forward + pooling +
  normalisation only, float16); the library's ``CudaEmbedder`` (``dtype=auto``) over
  the same texts; the full Ray Data backfill with ``--gpus-per-embedder 1`` and
  ``--workers`` distill actors. The run report's ``embed_device`` busy seconds over wall
  time is how busy the GPU was.
- **cores**: for each N, a child process pinned to cores 0..N-1 (``taskset``) starts a
  local Ray of N CPUs and runs the CPU backfill with ``--workers max(1, N/2)`` (the
  embed actors split the N cores between them); memories/s against N, and the ratio
  of the largest N to the smallest.

Table on stdout; ``benchmarks/results/backfill_gpu.json`` / ``backfill_cores.json`` and
a plot of the scaling curve beside the latter.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.backfill_bench import CACHE, RESULTS, dataset, key_texts, start_ray
from benchmarks.machine import machine


def _backfill(archive: Path, store: Path, **ray_options: Any) -> dict[str, Any]:
    from mnemoray.backfill import BackfillConfig, RayOptions, backfill
    from mnemoray.pipeline.backfill import RayDataEngine

    cfg = BackfillConfig(
        archive=str(archive),
        store=str(store),
        progress_interval_s=1e9,
        ray=RayOptions(**ray_options),
    )
    t0 = time.perf_counter()
    report = backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False)
    wall = time.perf_counter() - t0
    return {
        "seconds": round(report.seconds, 3),
        "driver_seconds": round(wall, 3),
        "sessions": report.sessions_read,
        "memories": report.memories_written,
        "memories_per_s": round(report.memories_written / report.seconds, 1),
        "sessions_per_s": round(report.sessions_read / report.seconds, 1),
        "stage_seconds": {k: round(v, 3) for k, v in report.stage_seconds.items()},
        "stage_cpu_seconds": dict(report.stage_cpu_seconds),
        "ray": cfg.ray.given(),
    }


def gpu(args) -> dict[str, Any]:
    import torch

    from benchmarks.embed_gpu import limit_probe
    from mnemoray.embedders import CudaEmbedder

    archive, meta = dataset(args.sessions, args.sessions_per_file, CACHE)
    texts = [t for session in key_texts(archive)[0] for t in session]
    embedder = CudaEmbedder(device="cuda", dtype="auto")
    limit = limit_probe(embedder, texts, "float16", embedder.max_batch_tokens, 3)
    embedder.encode(texts[:2048])
    t0 = time.perf_counter()
    embedder.encode(texts)
    library = len(texts) / (time.perf_counter() - t0)
    del embedder
    torch.cuda.empty_cache()
    start_ray()
    workers = args.workers or max(1, (os.cpu_count() or 2) - 2)
    runs = []
    for share in (float(g) for g in str(args.gpus_per_embedder).split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(
                _backfill(archive, Path(tmp) / "store", gpus_per_embedder=share, workers=workers)
            )
    run = max(runs, key=lambda r: r["memories_per_s"])
    busy = run["stage_seconds"].get("embed_device", 0.0) / run["seconds"]
    result = {
        "machine": machine(),
        "dataset": meta,
        "texts": len(texts),
        "limit_fp16_texts_per_s": round(limit, 1),
        "cuda_embedder_texts_per_s": round(library, 1),
        "cuda_embedder_of_limit": round(library / limit, 3),
        "pipeline": run,
        "pipelines": runs,
        "gpu_busy": round(busy, 3),
        "pipeline_of_limit": round(run["memories_per_s"] / limit, 3),
    }
    print(f"\nGPU backfill, {meta['sessions']} sessions, {len(texts)} memories")
    print(f"{'what':<44} {'memories/s':>12}")
    print(f"{'limit probe fp16 (forward only)':<44} {limit:>12,.0f}")
    print(f"{'CudaEmbedder auto (encode)':<44} {library:>12,.0f}")
    for r in runs:
        share = r["ray"]["gpus_per_embedder"]
        print(
            f"{f'Ray Data backfill, {share:g} GPU per embed actor, {workers} distill':<44} "
            f"{r['memories_per_s']:>12,.0f}"
        )
    print(
        f"best: GPU busy {busy:.0%} of the job; stage busy seconds {run['stage_seconds']}; "
        f"CPU seconds {run['stage_cpu_seconds']}"
    )
    return result


def one_cores_run(args) -> None:
    """Child process: already pinned to N cores; prints one JSON line."""
    archive, meta = dataset(args.sessions, args.sessions_per_file, CACHE)
    n = args.one_cores_run
    start_ray(n)
    with tempfile.TemporaryDirectory() as tmp:
        run = _backfill(archive, Path(tmp) / "store", workers=max(1, n // 2))
    print("RESULT " + json.dumps({"cores": n, **run}), flush=True)


def cores(args) -> dict[str, Any]:
    dataset(args.sessions, args.sessions_per_file, CACHE)  # generated once, not per child
    runs = []
    for n in args.cores:
        cmd = [
            "taskset",
            "-c",
            f"0-{n - 1}",
            sys.executable,
            "-m",
            "benchmarks.backfill_bench",
            "--one-cores-run",
            str(n),
            "--sessions",
            str(args.sessions),
            "--sessions-per-file",
            str(args.sessions_per_file),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode or not lines:
            raise SystemExit(f"{n} cores failed ({out.returncode}):\n{out.stderr[-3000:]}")
        runs.append(json.loads(lines[-1][len("RESULT ") :]))
        print(
            f"  {n:>3} cores: {runs[-1]['memories_per_s']:>8,.0f} memories/s "
            f"({runs[-1]['seconds']:.1f} s)",
            flush=True,
        )
    base = runs[0]["memories_per_s"]
    print(f"\n{'cores':>5} {'workers':>8} {'memories/s':>11} {'x first':>8}")
    for r in runs:
        print(
            f"{r['cores']:>5} {r['ray']['workers']:>8} {r['memories_per_s']:>11,.0f} "
            f"{r['memories_per_s'] / base:>8.2f}"
        )
    return {
        "machine": machine(),
        "runs": runs,
        "scaling": round(runs[-1]["memories_per_s"] / base, 2),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    xs = [r["cores"] for r in result["runs"]]
    ys = [r["memories_per_s"] for r in result["runs"]]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(xs, ys, marker="o", label="backfill (CPU, ONNX)")
    ax.plot(xs, [ys[0] * x / xs[0] for x in xs], linestyle=":", label="linear from the first")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("cores")
    ax.set_ylabel("memories/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args) -> None:
    if args.one_cores_run:
        one_cores_run(args)
        return
    out_dir = args.out.parent if args.out else RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda":
        path = out_dir / "backfill_gpu.json"
        path.write_text(json.dumps(gpu(args), indent=2) + "\n")
        print(f"wrote {path}")
    if args.cores:
        path = out_dir / "backfill_cores.json"
        result = cores(args)
        path.write_text(json.dumps(result, indent=2) + "\n")
        plot(result, path.with_suffix(".png"))
        print(f"wrote {path}")
