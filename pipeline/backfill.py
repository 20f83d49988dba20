"""The backfill dataflow on Ray Data (DESIGN.md "Batch: pipeline/ on Ray Data").

    files ──map_batches(read_files)──► ArchiveRows          tasks, 0.25 CPU, one per file
      ──map_batches(validate_batch)──► SessionItems         tasks, 0.25 CPU: validate,
                                                            quarantine, skip (ledger)
      ──map_batches(Distill)─────────► + memories           actor pool, 0.5 CPU each
        (or PlanPrompts ► ray.data.llm vLLM ► FinishDistill  with --summarizer vllm)
      ──map_batches(Embed)───────────► + embeddings         actor pool, 0.5 CPU (or GPUs)
      ──map_batches(prepare_chunk)───► Chunk                tasks, 0.25 CPU: segments per
                                                            shard + FAISS, uncommitted
      ──iter_rows() on the driver────► commit_chunk         ONE manifest commit per chunk
                                                            (memories + ledger together)

Every stage calls the in-process steps of ``mnemoray.memory.backfill``
(``validate_rows``, ``skip_processed``, ``distill_sessions``,
``embed_sessions``, ``superseded_for``) on the very ``SessionItem`` objects
they take in process; nothing is reimplemented here. The flow streams (no
all-to-all step) with ``preserve_order``, so chunks commit in archive order
as the in-process path does, and a killed job keeps every committed chunk.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from mnemoray.archive import estimate_rows
from mnemoray.embedders import Embedder
from mnemoray.memory.manifest import KEYWORD_ONLY_MODEL
from mnemoray.memory.runs import Progress, RunRecorder
from mnemoray.memory.service import embedder_spec
from mnemoray.memory.store import MemoryStore
from mnemoray.summarizers import available_summarizers

log = logging.getLogger(__name__)

# Resources per worker. Fractions, so the embedded default fits a 2-core machine:
# one distill actor + one embed actor (0.5 each) leave a core for the tasks.
ACTOR_CPUS = 0.5
TASK_CPUS = 0.25
EMBED_RUNTIMES = ("auto", "torch")
LOCAL_ENV = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
             "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass(frozen=True)
class BackfillConfig:
    archive: str
    store: str
    shards: int | None = None
    summarizer: str = "extractive"
    summarizer_options: dict[str, Any] = field(default_factory=dict)
    embedder: str | None = "default"
    # Sessions per distill / embed batch. 64 (~256 texts per encode call): 0.86 of raw
    # encode at 2,000 sessions on 2 cores, vs 0.71 at 32 (per-call overhead, fewer
    # texts to sort by length) and 0.81 at 256 (slower pipeline fill and drain).
    batch_size: int = 64
    commit_every: int = 256  # sessions per prepared chunk and manifest commit
    workers: int = 1  # actors per pool (distill, embed): autoscaling 1..workers
    actor_cpus: float = ACTOR_CPUS
    task_cpus: float = TASK_CPUS
    gpus_per_embedder: float = 0.0
    embed_runtime: str = "auto"  # auto: the ONNX build of the packaged MiniLM; torch
    embed_threads: int | None = None  # intra-op threads per embed actor (None: runtime's)
    llm_concurrency: int = 1  # vLLM engine replicas (each takes tp*pp GPUs)
    llm_batch_size: int = 64
    chunk_turns: int = 4
    ttl_s: float | None = None
    ray_address: str | None = None  # None: RAY_ADDRESS if set (ray job submit), else local
    run_id: str | None = None
    progress_interval_s: float = 10.0

    def check(self) -> None:
        for name in ("batch_size", "commit_every", "workers", "llm_concurrency",
                     "llm_batch_size", "chunk_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        for name in ("actor_cpus", "task_cpus"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)!r}")
        if self.embed_runtime not in EMBED_RUNTIMES:
            raise ValueError(f"embed_runtime: one of {', '.join(EMBED_RUNTIMES)}, "
                             f"got {self.embed_runtime!r}")
        if self.embed_threads is not None and (isinstance(self.embed_threads, bool) or
                                               not isinstance(self.embed_threads, int) or
                                               self.embed_threads < 1):
            raise ValueError(f"embed_threads: must be a positive integer, "
                             f"got {self.embed_threads!r}")
        if self.gpus_per_embedder < 0:
            raise ValueError(f"gpus_per_embedder: must be >= 0, got {self.gpus_per_embedder!r}")
        if self.summarizer not in available_summarizers():
            raise ValueError(f"unknown summarizer {self.summarizer!r}; known: "
                             f"{', '.join(available_summarizers())}")

    def public(self) -> dict[str, Any]:
        """The config as recorded in the run report (options may hold secrets: keys only)."""
        out = asdict(self)
        out["summarizer_options"] = sorted(self.summarizer_options)
        return out


@dataclass(frozen=True)
class BackfillRun:
    """Totals of a Ray Data backfill (the in-process ``BackfillReport`` fields first)."""

    sessions_read: int
    skipped: int
    quarantined: int
    memories_written: int
    seconds: float
    run_id: str
    sessions_per_s: float
    commits: int
    stage_seconds: dict[str, float]
    report_path: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- Ray ------------------------------------------------------------------------
def connect(address: str | None) -> bool:
    """Join (or start) Ray; True if this call started a local instance.

    Already initialised (a test's cluster, a notebook): used as is. ``address``
    None: ``RAY_ADDRESS`` when set (``ray job submit`` sets it), else a new
    local instance, the embedded default.
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":
        ray.init(address="local", include_dashboard=False, log_to_driver=True,
                 runtime_env={"env_vars": LOCAL_ENV})
        return True
    ray.init(address=address)
    return False


def build_dataset(cfg: BackfillConfig, store: MemoryStore,
                  spec: str | Embedder | None, files: list[dict[str, str]]):
    """The lazy Dataset of prepared chunks (nothing runs until it is iterated)."""
    import ray

    from pipeline.distill import Distill
    from pipeline.embed import Embed
    from pipeline.read import read_files
    from pipeline.validate import validate_batch
    from pipeline.write import prepare_chunk

    root, shards = str(store.root), store.shards
    pool = ray.data.ActorPoolStrategy(min_size=1, max_size=cfg.workers)
    ds = ray.data.from_items(files, override_num_blocks=len(files))
    ds = ds.map_batches(read_files, batch_size=1, batch_format="pyarrow",
                        num_cpus=cfg.task_cpus)
    ds = ds.map_batches(validate_batch, batch_size=cfg.batch_size, batch_format="pyarrow",
                        fn_kwargs={"store_dir": root, "shards": shards},
                        num_cpus=cfg.task_cpus)
    if cfg.summarizer == "vllm":
        ds = _vllm_stages(ds, cfg, root, shards, pool)
    else:
        ds = ds.map_batches(Distill, batch_size=cfg.batch_size, batch_format="pyarrow",
                            compute=pool, num_cpus=cfg.actor_cpus,
                            fn_constructor_kwargs={
                                "store_dir": root, "shards": shards,
                                "summarizer": cfg.summarizer,
                                "options": cfg.summarizer_options,
                                "chunk_turns": cfg.chunk_turns, "ttl_s": cfg.ttl_s})
    model, dim = None, 0
    if spec is None:
        model = KEYWORD_ONLY_MODEL
    else:
        gpus = cfg.gpus_per_embedder
        ds = ds.map_batches(Embed, batch_size=cfg.batch_size, batch_format="pyarrow",
                            compute=ray.data.ActorPoolStrategy(min_size=1, max_size=cfg.workers),
                            num_cpus=cfg.actor_cpus, num_gpus=gpus or None,
                            fn_constructor_kwargs={"store_dir": root, "shards": shards,
                                                   "spec": spec,
                                                   "device": "cuda" if gpus else "cpu",
                                                   "runtime": cfg.embed_runtime,
                                                   "threads": cfg.embed_threads})
    return ds.map_batches(prepare_chunk, batch_size=cfg.commit_every, batch_format="pyarrow",
                          num_cpus=cfg.task_cpus,
                          fn_kwargs={"store_dir": root, "shards": shards, "model": model,
                                     "dim": dim})


def _vllm_stages(ds, cfg: BackfillConfig, root: str, shards: int, pool):
    import ray

    from pipeline.llm import (
        FinishDistill,
        PlanPrompts,
        build_llm_stage,
        sampling_params,
        split_options,
    )

    model, sampling, engine_kwargs = split_options(cfg.summarizer_options)
    max_tokens = int(sampling.get("max_tokens", 512))
    params = sampling_params(max_tokens, float(sampling.get("temperature", 0.0)),
                             bool(sampling.get("guided_json", True)))
    ds = ds.map_batches(PlanPrompts, batch_size=cfg.batch_size, batch_format="pyarrow",
                        compute=pool, num_cpus=cfg.actor_cpus,
                        fn_constructor_kwargs={"model": model})
    ds = build_llm_stage(model, params, engine_kwargs, concurrency=cfg.llm_concurrency,
                         batch_size=cfg.llm_batch_size)(ds)
    return ds.map_batches(FinishDistill, batch_size=cfg.batch_size, batch_format="pyarrow",
                          compute=ray.data.ActorPoolStrategy(min_size=1, max_size=cfg.workers),
                          num_cpus=cfg.actor_cpus,
                          fn_constructor_kwargs={
                              "store_dir": root, "shards": shards, "max_tokens": max_tokens,
                              "fallback": sampling.get("fallback"),
                              "chunk_turns": cfg.chunk_turns, "ttl_s": cfg.ttl_s})


# -- the driver -----------------------------------------------------------------------
def run_backfill(cfg: BackfillConfig, *, stream: TextIO | None = None,
                 tty: bool | None = None) -> BackfillRun:
    """Run the backfill on Ray Data; commits happen here, on the driver, chunk by chunk.

    Idempotent and resumable: sessions already in the ledger are skipped, so
    re-running a killed job redoes exactly the sessions it had not committed.
    """
    import pickle

    cfg.check()
    store = MemoryStore(cfg.store, cfg.shards)  # a shard-count mismatch fails here
    spec = embedder_spec(store, cfg.embedder)
    if cfg.summarizer == "vllm":
        from pipeline.llm import require_vllm, split_options

        require_vllm()
        split_options(cfg.summarizer_options)  # model= given?
    from pipeline.read import file_rows
    from pipeline.write import CHUNK, commit_chunk

    files = file_rows(cfg.archive)  # a missing archive fails here, before Ray starts
    stream = stream if stream is not None else sys.stderr
    progress = Progress(estimate_rows(cfg.archive), stream=stream, tty=tty,
                        interval_s=cfg.progress_interval_s)
    recorder = RunRecorder(store.root, engine="ray_data", config=cfg.public(),
                           run_id=cfg.run_id)
    counts = {"sessions_read": 0, "skipped": 0, "quarantined": 0, "memories_written": 0,
              "sessions_committed": 0, "commits": 0, "segments_written": 0}
    stages: dict[str, float] = {}
    recorder.update(counts, force=True)
    started_ray = False
    summarizer_name: str | None = None
    done = 0
    restore: tuple[Any, bool, bool] | None = None
    try:
        if files:
            started_ray = connect(cfg.ray_address)
            import ray

            ctx = ray.data.DataContext.get_current()
            restore = (ctx, ctx.execution_options.preserve_order, ctx.enable_progress_bars)
            ctx.execution_options.preserve_order = True  # commit in archive order
            ctx.enable_progress_bars = progress.tty
            ds = build_dataset(cfg, store, spec, files)
            for row in ds.iter_rows():
                chunk = pickle.loads(row[CHUNK])
                summarizer_name = chunk.stats.get("summarizer") or summarizer_name
                t0 = time.perf_counter()
                result = commit_chunk(store, chunk, run_id=recorder.run_id,
                                      summarizer=summarizer_name)
                stages["commit"] = stages.get("commit", 0.0) + time.perf_counter() - t0
                for stage, secs in chunk.stats.get("seconds", {}).items():
                    stages[stage] = stages.get(stage, 0.0) + secs
                counts["sessions_read"] += chunk.stats.get("read", 0)
                counts["skipped"] += chunk.stats.get("skipped", 0)
                counts["quarantined"] += chunk.stats.get("quarantined", 0)
                counts["memories_written"] += result.written
                counts["sessions_committed"] += result.ledger_added
                counts["commits"] += 1
                counts["segments_written"] += chunk.prepared_segments
                # Sessions accounted for: the chunk's items (exact) plus the rows that
                # left the flow (tallied by their stage, which may trail its items).
                done += len(chunk.hashes)
                recorder.update(counts, stages, manifest_version=result.version)
                progress.update(done + counts["skipped"] + counts["quarantined"],
                                _extra(counts))
    except KeyboardInterrupt:
        recorder.update(counts, stages)
        recorder.finish("interrupted")
        raise
    except BaseException as exc:
        recorder.update(counts, stages)
        recorder.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if restore is not None:  # this process may run other Ray Data work afterwards
            ctx, order, bars = restore
            ctx.execution_options.preserve_order, ctx.enable_progress_bars = order, bars
        if started_ray:
            import ray

            ray.shutdown()
    progress.done = counts["sessions_read"]  # the tallies that trailed the last chunk
    progress.close(_extra(counts))
    recorder.update(counts, stages)
    path = recorder.finish("succeeded")
    seconds = recorder.seconds
    return BackfillRun(
        sessions_read=counts["sessions_read"], skipped=counts["skipped"],
        quarantined=counts["quarantined"], memories_written=counts["memories_written"],
        seconds=round(seconds, 3), run_id=recorder.run_id,
        sessions_per_s=round(counts["sessions_read"] / seconds, 3) if seconds else 0.0,
        commits=counts["commits"], stage_seconds={k: round(v, 3) for k, v in stages.items()},
        report_path=str(path))


def _extra(counts: dict[str, int]) -> str:
    return (f"memories {counts['memories_written']}  quarantined {counts['quarantined']}  "
            f"skipped {counts['skipped']}  commits {counts['commits']}")


__all__ = ["ACTOR_CPUS", "EMBED_RUNTIMES", "TASK_CPUS", "BackfillConfig", "BackfillRun",
           "build_dataset", "connect", "run_backfill"]
