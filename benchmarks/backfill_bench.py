"""Backfill throughput: the Ray Data pipeline vs a single-process loop vs raw encode.

Archived sessions come from ``benchmarks/datagen.py`` (multi-turn conversations with
planted facts, tool calls, near misses: the same generator as the recall benchmark),
written as Parquet parts of ``--sessions-per-file`` sessions. For each runtime of the
packaged MiniLM (``onnx``: its parity-gated ONNX Runtime build, what the pipeline's
embed actors run by default, ``--embedder default``; ``torch``: sentence-transformers,
``--embedder default,runtime=torch``) it measures, with the default ``extractive`` summarizer:

- **raw encode**: ``Embedder.encode`` over exactly the ``key_text`` of every memory the
  backfill writes, ``batch_size=64`` (what the ``Embed`` stage passes), in this process
  with the embedder's own thread count. Measured before AND after the other runs: on
  a shared machine the two differ when the load changes (reported as ``drift``).
  Diagnostics: the same texts encoded in the per-batch calls the Embed stage makes
  (``chunked``: the memories of ``--batch-size`` sessions per call), and at 1 thread.
- **naive loop**: one process, read -> distill each session -> embed the batch's
  memories (same embedder, batch 64) -> ``write_segment`` every 256 sessions. No ledger,
  no quarantine: the floor of what a backfill must do.
- **in-process backfill**: ``mnemoray.backfill.backfill`` with its default in-process
  engine (ledger, quarantine, supersede; what ``mnemoray backfill --in-process`` runs).
- **pipeline**: the same ``backfill`` with ``mnemoray.pipeline.backfill.RayDataEngine`` on a local
  Ray (started once per group, its start time reported apart) with the default config (what
  ``mnemoray backfill`` runs) and a sweep of ``--workers``, ``--batch-size`` and
  the embedder spec's ``threads`` (unset: ONNX Runtime uses every core; torch gets Ray's
  ``OMP_NUM_THREADS`` = 1 in a 0.5-CPU actor). Every run writes a fresh store.

Throughput is memories/s (rows written; the unit of raw encode's texts/s), sessions/s
and events/s. The goal: the pipeline's memories/s >= 80% of raw texts/s. Where the
rest goes is split from the run report's per-stage busy seconds:

    pipeline rate = (memories / embed busy s)   x (embed busy s / wall s)
                    embed stage speed              embed actors' utilisation

so ``stage speed / raw`` is what the actor's encode loses (threads, call sizes,
cores taken by the other stages), and ``utilisation`` what the dataflow loses (actor
start and model load, pipeline fill and drain, waiting on upstream stages, Ray's
scheduling and serialisation between stages).

Every run also records its **commit timeline** (``benchmarks/backfill_timeline.py``):
the time of each manifest commit vs the run's wall time, the first commit's time, and
the share of the commits made by 50% and 90% of the wall time (a job killed at 90%
keeps what was committed by then).

Run: ``.venv/bin/python benchmarks/backfill_bench.py`` (about 15 min on 2 idle cores)
-> table on stdout, ``benchmarks/results/backfill.json`` and ``backfill.png``.
``--quick``: 60 sessions, the default config only, results under benchmarks/.cache/.
``--device cuda`` / ``--cores 2,4,8,16``: the GPU pipeline and the CPU scaling curve
(``benchmarks/backfill_scale.py``).
``--timeline``: only the commit timelines of the in-process backfill and of the pipeline's
default config (ONNX), printed and stored under ``commit_timeline`` in the results file
(the other results in it are kept).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import version
from itertools import islice
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/ and mnemoray/ when run as a script

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from benchmarks.backfill_timeline import render, timeline  # noqa: E402
from benchmarks.datagen import DatasetConfig, generate  # noqa: E402
from mnemoray.backfill.archive import iter_archive, write_archive  # noqa: E402
from mnemoray.embedders import Embedder, OnnxEmbedder, open_embedder  # noqa: E402
from mnemoray.memory.records.distill import distill_session  # noqa: E402
from mnemoray.memory.service.service import embed_memories  # noqa: E402
from mnemoray.memory.store.parquet.store import MemoryStore  # noqa: E402
from mnemoray.summarizers import get_summarizer  # noqa: E402

RESULTS = HERE / "results"
CACHE = HERE / ".cache"
ENCODE_BATCH = 64  # mnemoray.pipeline.embed.Embed's encode batch
GOAL = 0.8
PAIRED_SAMPLE = 256  # texts: the raw reference measured around each pipeline run
SUMMARIZER = "extractive"
# runtime -> (embedder spec of the raw / naive / in-process runs, the pipeline's embedder
# spec: the store's "default" model in that runtime)
RUNTIMES: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "default"),
    "torch": ("torch", "default,runtime=torch"),
}


# -- data ---------------------------------------------------------------------------------
def dataset(sessions: int, per_file: int, cache: Path) -> tuple[Path, dict[str, Any]]:
    """The archive of ``sessions`` generated sessions (10 per user), cached by config."""
    users = max(1, -(-sessions // 10))
    cfg = DatasetConfig(users=users, sessions_per_user=10)
    out = cache / f"backfill-{cfg.fingerprint()}-{sessions}-{per_file}"
    meta_path = out / "meta.json"
    if meta_path.exists():
        return out / "archive", json.loads(meta_path.read_text())
    data = generate(cfg).sessions[:sessions]
    archive = out / "archive"
    if archive.exists():
        shutil.rmtree(archive)
    for i in range(0, len(data), per_file):
        write_archive(data[i : i + per_file], archive / f"part-{i // per_file:04d}.parquet")
    meta = {
        "sessions": len(data),
        "events": sum(len(s.events) for s in data),
        "users": users,
        "files": -(-len(data) // per_file),
        "fingerprint": cfg.fingerprint(),
        "events_per_session": round(sum(len(s.events) for s in data) / len(data), 2),
    }
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return archive, meta


def key_texts(archive: Path) -> tuple[list[list[str]], float]:
    """Per session, the key_texts the backfill embeds; and single-process distill seconds."""
    summarizer = get_summarizer(SUMMARIZER)
    out: list[list[str]] = []
    busy = 0.0
    for row in iter_archive(archive):
        assert row.session is not None, row.error
        t0 = time.perf_counter()
        memories = distill_session(row.session, summarizer)
        busy += time.perf_counter() - t0
        out.append([m.key_text for m in memories])
    return out, busy


# -- measurements -------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def raw_encode(
    embedder: Embedder, texts: Sequence[str], calls: Sequence[Sequence[str]] | None = None
) -> dict[str, Any]:
    embedder.encode(list(texts[:ENCODE_BATCH]), batch_size=ENCODE_BATCH)  # warm
    if calls is None:
        _, secs = timed(lambda: embedder.encode(list(texts), batch_size=ENCODE_BATCH))
    else:
        _, secs = timed(
            lambda: [embedder.encode(list(c), batch_size=ENCODE_BATCH) for c in calls if c]
        )
    return {
        "texts": len(texts),
        "seconds": round(secs, 3),
        "texts_per_s": round(len(texts) / secs, 2),
    }


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def one_thread(spec: str) -> tuple[Embedder, Callable[[], None]]:
    """The embedder at 1 intra-op thread, and how to undo it."""
    if spec == "onnx":
        return OnnxEmbedder(threads=1), lambda: None
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    return open_embedder(spec), lambda: torch.set_num_threads(before)


def _batches(it: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while batch := list(islice(it, size)):
        yield batch


def naive_loop(
    archive: Path, store_dir: Path, spec: str, batch_sessions: int, commit_every: int = 256
) -> dict[str, Any]:
    """Read, distill each session, embed per batch, write a segment per commit."""
    t0 = time.perf_counter()
    summarizer = get_summarizer(SUMMARIZER)
    embedder = open_embedder(spec)
    store = MemoryStore(store_dir)
    busy = {"distill": 0.0, "embed": 0.0, "write": 0.0}
    pending: list[Any] = []
    written = sessions = uncommitted = 0

    def commit() -> None:
        nonlocal pending, written, uncommitted
        t = time.perf_counter()
        written += store.write_segment(pending, embedder.model_id, embedder.dim).written
        busy["write"] += time.perf_counter() - t
        pending, uncommitted = [], 0

    for batch in _batches(iter(iter_archive(archive)), batch_sessions):
        t = time.perf_counter()
        memories = [m for row in batch for m in distill_session(row.session, summarizer)]
        busy["distill"] += time.perf_counter() - t
        t = time.perf_counter()
        pending += embed_memories(memories, embedder, batch_size=ENCODE_BATCH)
        busy["embed"] += time.perf_counter() - t
        sessions += len(batch)
        uncommitted += len(batch)
        if uncommitted >= commit_every:
            commit()
    if pending:
        commit()
    wall = time.perf_counter() - t0
    return {
        "seconds": round(wall, 3),
        "sessions": sessions,
        "memories": written,
        "stage_seconds": {k: round(v, 3) for k, v in busy.items()},
    }


def in_process(archive: Path, store_dir: Path, spec: str) -> dict[str, Any]:
    from mnemoray.backfill import BackfillConfig, backfill

    cfg = BackfillConfig(
        archive, store_dir, summarizer=SUMMARIZER, embedder=spec, progress_interval_s=1e9
    )
    report, wall = timed(lambda: backfill(cfg, stream=io.StringIO(), tty=False))
    return {
        "seconds": round(wall, 3),
        "sessions": report.sessions_read,
        "memories": report.memories_written,
        "commit_timeline": timeline(report),
    }


def start_ray(cpus: int | None = None) -> float:
    """A local Ray of ``cpus`` CPUs (None: this machine's), quiet; seconds it took."""
    import ray

    from mnemoray.pipeline.backfill import LOCAL_ENV

    env = dict(LOCAL_ENV)
    _, secs = timed(
        lambda: ray.init(
            num_cpus=cpus or os.cpu_count() or 2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    return secs


def actor_threads() -> dict[str, Any]:
    """What a 0.5-CPU actor (the Embed stage's size) gets: OMP_NUM_THREADS, torch threads."""
    import ray

    from mnemoray.backfill.config import RAY_DEFAULTS

    actor_cpus = RAY_DEFAULTS.actor_cpus

    @ray.remote(num_cpus=actor_cpus)
    class Probe:
        def threads(self) -> dict[str, Any]:
            import torch

            return {
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                "torch_threads": torch.get_num_threads(),
                "num_cpus": actor_cpus,
            }

    probe = Probe.remote()
    try:
        return ray.get(probe.threads.remote())
    finally:
        ray.kill(probe)


class ActorCounter:
    """Most actors alive at once per stage (does ``--workers`` really add actors?)."""

    def __init__(self, every_s: float = 1.0) -> None:
        import threading

        self.every_s = every_s
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        from ray._private import state

        while not self._stop.wait(self.every_s):
            try:
                alive = [
                    a.get("ActorClassName", "")
                    for a in state.actors().values()
                    if a.get("State") == "ALIVE"
                ]
            except Exception:  # a private API: a sample lost is no failure
                continue
            for stage in ("Distill", "Embed"):
                n = sum(1 for name in alive if stage in name)
                self.peak[stage] = max(self.peak.get(stage, 0), n)

    def __enter__(self) -> ActorCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def pipeline_run(
    archive: Path, store_dir: Path, runtime: str, *, threads: int | None = None, **ray_options: Any
) -> dict[str, Any]:
    from mnemoray.backfill import BackfillConfig, RayOptions, backfill
    from mnemoray.embedders import EmbedderSpec
    from mnemoray.pipeline.backfill import RayDataEngine

    spec = EmbedderSpec.parse(RUNTIMES[runtime][1]).override(threads=threads)
    cfg = BackfillConfig(
        archive=str(archive),
        store=str(store_dir),
        progress_interval_s=1e9,
        embedder=spec,
        ray=RayOptions(**ray_options),
    )
    opts = cfg.ray.resolved()
    import ray

    opts = opts.for_cluster(ray.cluster_resources())  # what the engine sizes for it
    with ActorCounter() as actors:
        run, wall = timed(lambda: backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False))
    return {
        "seconds": run.seconds,
        "driver_seconds": round(wall, 3),
        "max_alive_actors": actors.peak,
        "sessions": run.sessions_read,
        "memories": run.memories_written,
        "commits": run.commits,
        "stage_seconds": run.stage_seconds,
        "commit_timeline": timeline(run),
        "config": {
            "embedder": str(spec),
            "embed_runtime": spec.runtime,
            "embed_threads": spec.threads,
            "workers": opts.workers,
            "batch_size": opts.batch_size,
            "commit_every": cfg.commit_every,
            "actor_cpus": opts.actor_cpus,
            "task_cpus": opts.task_cpus,
        },
    }


# -- analysis -----------------------------------------------------------------------------
def rates(r: dict[str, Any], events: int) -> dict[str, Any]:
    secs = r["seconds"]
    return {
        "sessions_per_s": round(r["sessions"] / secs, 2),
        "events_per_s": round(events / secs, 1),
        "memories_per_s": round(r["memories"] / secs, 2),
    }


def decompose(r: dict[str, Any], raw_tps: float) -> dict[str, Any]:
    """Stage shares of wall time and the stage-speed x utilisation split."""
    wall, stages = r["seconds"], r.get("stage_seconds") or {}
    out: dict[str, Any] = {
        "share_of_wall": {k: round(v / wall, 3) for k, v in sorted(stages.items())},
        "busy_sum_s": round(sum(stages.values()), 3),
    }
    embed = stages.get("embed", 0.0)
    if embed > 0:
        speed = r["memories"] / embed
        out["embed_stage_memories_per_s"] = round(speed, 2)
        out["embed_speed_vs_raw"] = round(speed / raw_tps, 3)
        out["embed_utilisation"] = round(embed / wall, 3)
    out["vs_raw"] = round(r["memories"] / wall / raw_tps, 3)
    return out


SWEEP: list[tuple[str, dict[str, Any]]] = [
    # (label, RayOptions fields, or threads= of the embedder spec); the first is the default
    ("default", {}),
    ("batch 16", {"batch_size": 16}),
    ("batch 32", {"batch_size": 32}),
    ("batch 256", {"batch_size": 256}),
    ("workers 2", {"workers": 2}),
    ("embed threads 1", {"threads": 1}),
    ("workers 2, embed threads 1", {"workers": 2, "threads": 1}),
]
QUICK_SWEEP = [SWEEP[0]]


def bench_runtime(
    runtime: str,
    archive: Path,
    meta: dict[str, Any],
    texts: list[list[str]],
    sweep: list[tuple[str, dict[str, Any]]],
    work: Path,
    batch_size: int,
    diagnostics: bool,
) -> dict[str, Any]:
    import ray

    spec = RUNTIMES[runtime][0]
    flat = [t for per in texts for t in per]
    events = meta["events"]
    embedder, load_s = timed(lambda: open_embedder(spec))
    out: dict[str, Any] = {
        "embedder": runtime,
        "spec": spec,
        "model_id": embedder.model_id,
        "load_seconds": round(load_s, 2),
        "driver_threads": None if spec == "onnx" else torch_threads(),
    }
    print(f"[{runtime}] raw encode of {len(flat)} key_texts ...", flush=True)
    out["raw_before"] = raw_encode(embedder, flat)
    if diagnostics:
        out["raw_chunked"] = raw_encode(
            embedder,
            flat,
            calls=[
                [t for per in texts[i : i + batch_size] for t in per]
                for i in range(0, len(texts), batch_size)
            ],
        )
        single, undo = one_thread(spec)
        try:
            out["raw_1_thread"] = raw_encode(single, flat)
        finally:
            undo()
    print(f"[{runtime}] naive loop ...", flush=True)
    naive = naive_loop(archive, work / f"naive-{runtime}", spec, batch_size)
    out["naive"] = {**naive, **rates(naive, events)}
    print(f"[{runtime}] in-process backfill ...", flush=True)
    inproc = in_process(archive, work / f"inproc-{runtime}", spec)
    out["in_process"] = {**inproc, **rates(inproc, events)}

    # Paired reference: raw encode of a fixed sample right before and after each run,
    # so a run is compared with the raw speed under the same machine load.
    sample = flat[:: max(1, len(flat) // PAIRED_SAMPLE)][:PAIRED_SAMPLE]  # lengths as in flat
    runs = []
    try:
        start_s = start_ray()
        probe = actor_threads()
        # The first Ray Data job on a fresh Ray instance also starts and warms its worker
        # processes (imports, first task leases): measured here as ~0.1 of raw encode
        # lost by whichever config ran first. One archive file with the default config
        # takes that hit; it is reported apart, like Ray's own start.
        first = sorted(archive.glob("*.parquet"))[0]
        print(f"[{runtime}] pipeline warm-up on {first.name} ...", flush=True)
        warm = pipeline_run(first, work / f"ray-{runtime}-warmup", runtime)
        out["warmup"] = {
            **warm,
            "archive_file": first.name,
            "memories_per_s": round(warm["memories"] / warm["seconds"], 2),
        }
        for label, overrides in sweep:
            print(f"[{runtime}] pipeline: {label} ...", flush=True)
            before = raw_encode(embedder, sample)["texts_per_s"]
            r = pipeline_run(archive, work / f"ray-{runtime}-{len(runs)}", runtime, **overrides)
            after = raw_encode(embedder, sample)["texts_per_s"]
            r.update(
                label=label,
                ray_start_seconds=round(start_s, 2),
                actor_threads=probe,
                raw_paired_texts_per_s=round((before + after) / 2, 2),
                **rates(r, events),
            )
            runs.append(r)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    print(f"[{runtime}] raw encode again ...", flush=True)
    out["raw_after"] = raw_encode(embedder, flat)
    # The sample's speed relative to the full set's, measured back to back: it turns a
    # paired sample speed into the full set's speed at that moment.
    calib = out["raw_after"]["texts_per_s"] / raw_encode(embedder, sample)["texts_per_s"]
    out["paired_calibration"] = round(calib, 3)
    raw_tps = (out["raw_before"]["texts_per_s"] + out["raw_after"]["texts_per_s"]) / 2
    out["raw_texts_per_s"] = round(raw_tps, 2)
    out["raw_drift"] = round(
        out["raw_after"]["texts_per_s"] / out["raw_before"]["texts_per_s"] - 1, 3
    )
    for r in runs:
        r["analysis"] = decompose(r, raw_tps)
        r["analysis"]["vs_raw_paired"] = round(
            r["memories_per_s"] / (r["raw_paired_texts_per_s"] * calib), 3
        )
    out["naive"]["analysis"] = decompose(out["naive"], raw_tps)
    out["in_process"]["vs_raw"] = round(out["in_process"]["memories_per_s"] / raw_tps, 3)
    out["pipeline"] = runs
    return out


# -- output -------------------------------------------------------------------------------
STAGES = ("read", "validate", "distill", "embed", "write", "commit")


def _actors(r: dict[str, Any]) -> str:
    peak = r.get("max_alive_actors")
    return "" if not peak else f"{peak.get('Distill', 0)}+{peak.get('Embed', 0)}"


def table(results: dict[str, Any]) -> str:
    lines = []
    head = (
        f"{'runtime':<8} {'run':<26} {'wall s':>7} {'sess/s':>7} {'events/s':>8} "
        f"{'mem/s':>7} {'vs raw':>6}  "
        + " ".join(f"{s[:6]:>6}" for s in STAGES)
        + f" {'emb spd':>7} {'emb util':>8} {'vs paired':>9} {'actors':>6}"
    )
    lines += [head, "-" * len(head)]
    for e in results["embedders"]:
        raw = e["raw_texts_per_s"]
        lines.append(
            f"{e['embedder']:<8} {'raw encode (texts/s)':<26} "
            f"{e['raw_before']['seconds']:>7.1f} {'':>7} {'':>8} {raw:>7.1f} "
            f"{1.0:>6.2f}  (before {e['raw_before']['texts_per_s']:.1f}, after "
            f"{e['raw_after']['texts_per_s']:.1f}, drift {e['raw_drift']:+.0%})"
        )
        for key, extra in (
            ("raw_chunked", "calls of one pipeline batch"),
            ("raw_1_thread", "1 intra-op thread"),
        ):
            if key in e:
                lines.append(
                    f"{'':<8} {'  raw, ' + extra:<26} {e[key]['seconds']:>7.1f} "
                    f"{'':>7} {'':>8} {e[key]['texts_per_s']:>7.1f} "
                    f"{e[key]['texts_per_s'] / raw:>6.2f}"
                )
        rows = [("naive loop", e["naive"]), ("in-process backfill", e["in_process"])]
        rows += [(f"ray: {r['label']}", r) for r in e["pipeline"]]
        for label, r in rows:
            a = r.get("analysis") or {}
            shares = a.get("share_of_wall") or {}
            vs = a.get("vs_raw", r.get("vs_raw", 0.0))
            stage_cols = " ".join(
                f"{shares[s]:>6.0%}" if s in shares else f"{'':>6}" for s in STAGES
            )
            spd = a.get("embed_speed_vs_raw")
            util = a.get("embed_utilisation")
            lines.append(
                f"{'':<8} {label:<26} {r['seconds']:>7.1f} {r['sessions_per_s']:>7.1f} "
                f"{r['events_per_s']:>8.0f} {r['memories_per_s']:>7.1f} {vs:>6.2f}  "
                f"{stage_cols} {'' if spd is None else f'{spd:.2f}':>7} "
                f"{'' if util is None else f'{util:.2f}':>8} "
                f"{a.get('vs_raw_paired', ''):>9} {_actors(r):>6}"
            )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, 2, figsize=(13, 4.8), sharey=True, gridspec_kw={"width_ratios": [1, 1.6]}
    )
    colors = {"onnx": "tab:orange", "torch": "tab:blue"}
    groups = results["embedders"]
    width = 0.8 / max(1, len(groups))
    for g, e in enumerate(groups):
        name, raw, runs = e["embedder"], e["raw_texts_per_s"], e["pipeline"]
        color = colors.get(name, "gray")
        for ax in axes:
            ax.axhline(raw, color=color, ls="--", lw=1)
            ax.axhline(GOAL * raw, color=color, ls=":", lw=1)
            ax.text(
                0.01,
                raw,
                f"raw {name} {raw:.0f}/s",
                color=color,
                va="bottom",
                fontsize=8,
                transform=ax.get_yaxis_transform(),
            )
        pts = sorted(
            {
                r["config"]["batch_size"]: r["memories_per_s"]
                for r in runs
                if r["config"]["workers"] == 1 and r["config"]["embed_threads"] is None
            }.items()
        )
        if pts:
            axes[0].plot(*zip(*pts, strict=True), marker="o", color=color, label=name)
        xs = [i + (g - (len(groups) - 1) / 2) * width for i in range(len(runs))]
        axes[1].bar(xs, [r["memories_per_s"] for r in runs], width=width, color=color, label=name)
        axes[1].set_xticks(
            range(len(runs)), [r["label"] for r in runs], rotation=30, ha="right", fontsize=8
        )
    axes[0].set_xscale("log", base=2)
    axes[0].set_xlabel("--batch-size (sessions per distill/embed batch), workers 1")
    axes[0].set_ylabel("memories / s (pipeline)")
    axes[1].set_xlabel("configuration (--workers, --batch-size, embedder threads)")
    top = max(e["raw_texts_per_s"] for e in groups)
    axes[0].set_ylim(0, top * 1.15)
    for ax in axes:
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8, loc="lower right")
    load = results["machine"]["load_average_start"][0]
    fig.suptitle(
        f"Backfill on Ray Data, {results['dataset']['sessions']} sessions, "
        f"{results['dataset']['memories']} memories, {os.cpu_count()} cores "
        f"(dashed: raw encode, dotted: {GOAL:.0%} goal; load avg at start "
        f"{load:.1f})",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=2000)
    p.add_argument("--sessions-per-file", type=int, default=250)
    p.add_argument(
        "--runtimes", default="onnx,torch", help=f"comma-separated, of: {', '.join(RUNTIMES)}"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="60 sessions, default config only, results in benchmarks/.cache/",
    )
    p.add_argument(
        "--sweep",
        default=None,
        help="comma-separated labels of the configurations to run (default: all; "
        "the first run is always the default config)",
    )
    p.add_argument(
        "--no-diagnostics", action="store_true", help="skip the chunked and 1-thread raw encodes"
    )
    p.add_argument(
        "--timeline",
        action="store_true",
        help="only the commit timelines (in-process and the pipeline's default "
        "config); merged into the results file under 'commit_timeline'",
    )
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None)
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: the GPU pipeline beside the GPU's limit (benchmarks/backfill_scale.py)",
    )
    p.add_argument(
        "--cores",
        default=None,
        help="comma-separated core counts: the CPU "
        "scaling curve (taskset, one local Ray per count)",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="cuda: distill actors (default: cores - 2)"
    )
    p.add_argument(
        "--gpus-per-embedder",
        default="1",
        help="cuda: comma-separated GPU shares per embed actor, one pipeline run "
        "each (0.25: four embed actors on one GPU, each tokenising on its own)",
    )
    p.add_argument("--one-cores-run", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--commit",
        action="store_true",
        help="only the driver's commit step: in-process and the pipeline's default "
        "config, commit busy seconds (benchmarks/backfill_commit.py)",
    )
    p.add_argument(
        "--commit-embedder",
        default="none",
        help="--commit: the embedder spec (none: keyword-only, so embedding "
        "does not hide the commit step)",
    )
    p.add_argument(
        "--commit-label",
        default="",
        help="--commit: names the run in the results file (runs are appended)",
    )
    p.add_argument(
        "--machine-note",
        default="",
        help="--commit: what the machine is and how loaded (stored with the results)",
    )
    args = p.parse_args(argv)
    if args.commit:
        from benchmarks import backfill_commit

        backfill_commit.run(args)
        return 0
    if args.device == "cuda" or args.cores or args.one_cores_run:
        from benchmarks import backfill_scale

        args.cores = [int(c) for c in args.cores.split(",")] if args.cores else []
        backfill_scale.run(args)
        return 0
    if args.quick:
        args.sessions, args.sessions_per_file = 60, 20
    out = args.out or (CACHE / "backfill-quick.json" if args.quick else RESULTS / "backfill.json")
    png = args.plot or out.with_suffix(".png")
    sweep = QUICK_SWEEP if args.quick else SWEEP
    if args.sweep:
        wanted = {w.strip() for w in args.sweep.split(",") if w.strip()}
        unknown = wanted - {label for label, _ in SWEEP}
        if unknown:
            p.error(
                f"--sweep: unknown {', '.join(sorted(unknown))}; known: "
                f"{', '.join(label for label, _ in SWEEP)}"
            )
        sweep = [SWEEP[0]] + [s for s in SWEEP[1:] if s[0] in wanted]

    load_start = os.getloadavg()
    print(f"load average {load_start}", flush=True)
    archive, meta = dataset(args.sessions, args.sessions_per_file, CACHE)
    if args.timeline:
        return timeline_only(archive, meta, out, load_start)
    texts, distill_s = key_texts(archive)
    flat = sum(len(t) for t in texts)
    print(
        f"{meta['sessions']} sessions, {meta['events']} events, {meta['files']} files, "
        f"{flat} memories ({flat / meta['sessions']:.1f}/session); single-process distill "
        f"{meta['sessions'] / distill_s:.0f} sessions/s",
        flush=True,
    )
    from mnemoray.backfill.config import RAY_DEFAULTS

    batch_size = RAY_DEFAULTS.batch_size  # the naive loop's batches: the pipeline's
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    unknown = sorted(set(runtimes) - set(RUNTIMES))
    if unknown:
        p.error(f"--runtimes: unknown {', '.join(unknown)}; known: {', '.join(RUNTIMES)}")
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_start": load_start,
        },
        "versions": {
            d: version(d) for d in ("ray", "torch", "onnxruntime", "sentence-transformers")
        },
        "dataset": {**meta, "memories": flat, "archive": str(archive)},
        "settings": {
            "summarizer": SUMMARIZER,
            "encode_batch": ENCODE_BATCH,
            "goal": GOAL,
            "quick": args.quick,
            "sweep": [s[0] for s in sweep],
        },
        "distill_only_sessions_per_s": round(meta["sessions"] / distill_s, 1),
        "embedders": [],
    }
    with tempfile.TemporaryDirectory(prefix="backfill-bench-") as tmp:
        for i, runtime in enumerate(runtimes):
            # The sweep runs on the first runtime (the default, ONNX); the others run
            # the default config only, for comparison (torch is ~2x slower to sweep).
            results["embedders"].append(
                bench_runtime(
                    runtime,
                    archive,
                    meta,
                    texts,
                    sweep if i == 0 else sweep[:1],
                    Path(tmp),
                    batch_size,
                    diagnostics=not args.no_diagnostics and not args.quick,
                )
            )
            out.parent.mkdir(parents=True, exist_ok=True)  # partial results survive a kill
            out.with_suffix(".partial.json").write_text(json.dumps(results, indent=1))
    results["machine"]["load_average_end"] = os.getloadavg()
    best = {
        e["embedder"]: max(e["pipeline"], key=lambda r: r["memories_per_s"])
        for e in results["embedders"]
    }
    results["summary"] = {
        spec: {
            "default_config_vs_raw": e["pipeline"][0]["analysis"]["vs_raw"],
            "default_config_memories_per_s": e["pipeline"][0]["memories_per_s"],
            "best_config": best[spec]["label"],
            "best_memories_per_s": best[spec]["memories_per_s"],
            "best_vs_raw": best[spec]["analysis"]["vs_raw"],
            "best_vs_raw_paired": best[spec]["analysis"]["vs_raw_paired"],
            "default_config_vs_raw_paired": e["pipeline"][0]["analysis"]["vs_raw_paired"],
            "goal_met_default": e["pipeline"][0]["analysis"]["vs_raw"] >= GOAL,
            "goal_met_best": best[spec]["analysis"]["vs_raw"] >= GOAL,
        }
        for spec, e in ((e["embedder"], e) for e in results["embedders"])
    }
    results["commit_timeline"] = {
        e["embedder"]: {
            "in_process": e["in_process"]["commit_timeline"],
            "ray_data_default": e["pipeline"][0]["commit_timeline"],
        }
        for e in results["embedders"]
    }
    print()
    print(table(results))
    for e in results["embedders"]:
        print(render(f"{e['embedder']} in-process", e["in_process"]["commit_timeline"]))
        print(render(f"{e['embedder']} ray default", e["pipeline"][0]["commit_timeline"]))
    for e in results["embedders"]:
        w = e.get("warmup")
        if w:
            print(
                f"{e['embedder']}: warm-up (first job on the fresh Ray instance, "
                f"{w['archive_file']}, default config, not in the table): "
                f"{w['memories']} memories in {w['seconds']:.1f} s = "
                f"{w['memories_per_s']:.1f}/s"
            )
    print(
        f"\nshares: a stage's busy seconds (summed over its workers) / wall; 'emb spd': "
        f"embed stage memories per busy second / raw; 'emb util': embed busy / wall.\n"
        f"load average start {load_start}, end {results['machine']['load_average_end']}"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    out.with_suffix(".partial.json").unlink(missing_ok=True)
    plot(results, png)
    print(f"wrote {out} and {png}")
    return 0


def timeline_only(
    archive: Path, meta: dict[str, Any], out: Path, load_start: tuple[float, float, float]
) -> int:
    """The commit timelines of the in-process backfill and the pipeline's default config."""
    import ray

    section: dict[str, Any] = {
        "dataset": {k: meta[k] for k in ("sessions", "files", "events")},
        "machine": {"cpus": os.cpu_count(), "load_average_start": load_start},
    }
    with tempfile.TemporaryDirectory(prefix="backfill-timeline-") as tmp:
        print("in-process backfill ...", flush=True)
        section["in_process"] = in_process(archive, Path(tmp) / "inproc", RUNTIMES["onnx"][0])[
            "commit_timeline"
        ]
        try:
            section["ray_start_seconds"] = round(start_ray(), 2)
            print("pipeline, default config ...", flush=True)
            run = pipeline_run(archive, Path(tmp) / "ray", "onnx")
            section["ray_data_default"] = {**run["commit_timeline"], "config": run["config"]}
        finally:
            if ray.is_initialized():
                ray.shutdown()
    section["machine"]["load_average_end"] = os.getloadavg()
    print(render("in-process", section["in_process"]))
    print(render("ray default", section["ray_data_default"]))
    results = json.loads(out.read_text()) if out.exists() else {}
    results["commit_timeline"] = section
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote commit_timeline into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
