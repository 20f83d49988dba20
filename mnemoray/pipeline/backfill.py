"""The Ray Data engine of the backfill (docs/architecture.md, "Data flow of a backfill").

    files ──map_batches(read_files)──► ArchiveRows          tasks, 0.25 CPU, one per file
      ──map_batches(validate_batch)──► SessionItems         tasks, 0.25 CPU: validate,
                                                            quarantine, skip (ledger)
      ──repartition(batch_size rows)─► blocks of one batch  tasks: cut the file's rows
      ──map_batches(Distill)─────────► + memories           actor pool, 0.5 CPU each
        (or PlanPrompts ► ray.data.llm vLLM ► FinishDistill  with --summarizer vllm)
      ──map_batches(Embed)───────────► + embeddings         actor pool, 0.5 CPU (or GPUs)
      ──map_batches(prepare_chunk)───► Chunk                tasks, 0.25 CPU: segments per
                                                            shard + FAISS, and the users'
                                                            merged entity graphs, uncommitted
      ──iter_batches() on the driver─► commit_chunk         ONE manifest commit per chunk
                                                            (memories + ledger + graph)

Every stage calls the core steps of ``mnemoray.backfill.steps``
(``validate_rows``, ``skip_processed``, ``distill_sessions``,
``embed_sessions``) and ``make_chunk`` on the very ``SessionItem`` objects the
in-process engine uses; the driver loop, the commit step, the run record and
the report are the core's (``mnemoray.backfill.backfill``). This module only
produces the chunks. The flow streams (no all-to-all step) with
``preserve_order``, so chunks commit in archive order as in process, and a
killed job keeps every committed chunk.

Commits stream because blocks stay small: a map task hands its output on only
as whole blocks, and Ray Data grows a task's output block up to
``DataContext.target_max_block_size`` (128 MiB) before yielding it. A file read
in one task would be ONE block, and every later stage would pass it on only
once its whole file is done: with one big file, nothing was committed until
the whole archive was distilled. ``repartition(target_num_rows_per_block=
batch_size)`` cuts the validated rows into blocks of one batch right after the
read, so each distill / embed / prepare task handles about one batch and a
chunk is committed as soon as its ``commit_every`` sessions are through.
Blocks are capped at ``BLOCK_BYTES`` (16 MiB), so a read task of a big file
buffers at most that before its first batch moves on. The driver takes each
prepared chunk as soon as it is ready (no prefetch: a prefetching iterator
hands a block on only once the next one is ready). Ray Data's backpressure
(its object store budget per operator) bounds what runs ahead of the commits.

    from mnemoray.backfill import BackfillConfig, backfill
    from mnemoray.pipeline.backfill import engine
    report = backfill(BackfillConfig(archive=..., store=...), engine("ray_data"))
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from mnemoray.backfill import BackfillConfig, Engine, InProcessEngine
from mnemoray.backfill.commit import Chunk
from mnemoray.backfill.config import GPU_EMBED_BATCH, RayOptions, on_gpus
from mnemoray.embedders import Embedder, EmbedderSpec, resolve_spec
from mnemoray.embedders.base import KEYWORD_ONLY_MODEL
from mnemoray.errors import InvalidInput
from mnemoray.memory.store.protocol import MemoryBackend
from mnemoray.ray_local import start_ray

ENGINES = ("in_process", "ray_data")
# Most bytes per block of the flow (Ray Data's default is 128 MiB): see RayDataEngine.
BLOCK_BYTES = 16 << 20
# The environment of a local Ray instance this engine starts (its workers, not this process).
LOCAL_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
}


# -- Ray ------------------------------------------------------------------------
def connect(address: str | None) -> bool:
    """Join (or start) Ray; True if this call started a local instance.

    Already initialised (a test's cluster, a notebook): used as is. ``address``
    None: ``RAY_ADDRESS`` when set (``ray job submit`` sets it), else a new
    local instance listening on 127.0.0.1 only, the embedded default.
    """
    return start_ray(address, LOCAL_ENV, env_when_joining=False)


def build_dataset(
    cfg: BackfillConfig,
    opts: RayOptions,
    store: MemoryBackend,
    spec: EmbedderSpec | Embedder | None,
    files: list[dict[str, str]],
):
    """The lazy Dataset of prepared chunks (nothing runs until it is iterated)."""
    import ray

    from mnemoray.pipeline.distill import Distill
    from mnemoray.pipeline.embed import Embed
    from mnemoray.pipeline.read import read_files
    from mnemoray.pipeline.validate import validate_batch
    from mnemoray.pipeline.write import prepare_chunk

    # Workers reopen the store by its location (a path or a parquet:// / lancedb:// URI).
    root, shards = store.uri, store.shards
    pool = ray.data.ActorPoolStrategy(size=opts.workers)
    ds: ray.data.Dataset = ray.data.from_items(files, override_num_blocks=len(files))
    ds = ds.map_batches(read_files, batch_size=1, batch_format="pyarrow", num_cpus=opts.task_cpus)
    ds = ds.map_batches(
        validate_batch,  # type: ignore[arg-type]  # ray's stub has no fn_kwargs arguments
        batch_size=opts.batch_size,
        batch_format="pyarrow",
        fn_kwargs={"store_dir": root, "shards": shards},
        num_cpus=opts.task_cpus,
    )
    # Blocks of one batch: a whole file in one block would reach the commits only once
    # every session of it is distilled (see the module docstring). Strict: exactly one
    # batch, across file ends too, so chunks hold exactly commit_every sessions when it is
    # a multiple of batch_size (else at most commit_every).
    ds = ds.repartition(target_num_rows_per_block=opts.batch_size, strict=True)
    if cfg.summarizer == "vllm" and cfg.summarize:
        ds = _vllm_stages(ds, cfg, opts, root, shards, pool)
    else:
        ds = ds.map_batches(
            Distill,
            batch_size=opts.batch_size,
            batch_format="pyarrow",
            compute=pool,
            num_cpus=opts.actor_cpus,
            fn_constructor_kwargs={
                "store_dir": root,
                "shards": shards,
                "summarizer": cfg.summarizer,
                "options": cfg.summarizer_options,
                "chunk_turns": cfg.chunk_turns,
                "ttl_s": cfg.ttl_s,
                "summarize": cfg.summarize,
                "scopes": cfg.scopes,
            },
        )
    model, dim = None, 0
    if spec is None:
        model = KEYWORD_ONLY_MODEL
    else:
        actors, spec = embed_layout(
            opts, spec, ray.cluster_resources(), reserved_gpus=llm_gpus(cfg, opts)
        )
        gpus = opts.gpus_per_embedder
        batch = opts.embed_batch_size or (GPU_EMBED_BATCH if gpus else opts.batch_size)
        ds = ds.map_batches(
            Embed,
            batch_size=batch,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=opts.actor_cpus,
            num_gpus=gpus or None,
            fn_constructor_kwargs={"store_dir": root, "shards": shards, "spec": spec},
        )
    return ds.map_batches(
        prepare_chunk,  # type: ignore[arg-type]  # ray's stub has no fn_kwargs arguments
        batch_size=cfg.commit_every,
        batch_format="pyarrow",
        num_cpus=opts.task_cpus,
        fn_kwargs={"store_dir": root, "shards": shards, "model": model, "dim": dim},
    )


def llm_gpus(cfg: BackfillConfig, opts: RayOptions) -> float:
    """GPUs the vLLM summarizer's engines hold (0 without it): replicas x tp x pp."""
    if cfg.summarizer != "vllm" or not cfg.summarize:
        return 0.0
    from mnemoray.pipeline.llm import split_options

    engine = split_options(cfg.summarizer_options)[2]
    per_engine = int(engine.get("tensor_parallel_size", 1)) * int(
        engine.get("pipeline_parallel_size", 1)
    )
    assert opts.llm_concurrency is not None  # resolved options (RAY_DEFAULTS sets it)
    return float(opts.llm_concurrency * per_engine)


def embed_layout(
    opts: RayOptions,
    spec: EmbedderSpec | Embedder,
    resources: dict[str, float],
    reserved_gpus: float = 0.0,
) -> tuple[int, EmbedderSpec | Embedder]:
    """(embed actors, the spec each opens) for a cluster with ``resources``.

    On GPUs: one actor per ``gpus_per_embedder`` share of every GPU in the cluster but
    the ``reserved_gpus`` (the vLLM engines'; a fixed pool that took them would leave
    the engines waiting forever). On CPUs: ``workers`` actors (None: ``default_workers``)
    that split the cluster's cores between them (a spec that sets ``threads`` keeps it):
    an ONNX Runtime session left to its default takes every core, so N actors would each
    run N threads and the stage would not scale.
    """
    gpus = opts.gpus_per_embedder
    if gpus:
        total = resources.get("GPU", 0.0) - reserved_gpus
        if total < gpus:
            raise InvalidInput(
                f"the Ray cluster has {total:g} GPU(s) free for embedding "
                f"({reserved_gpus:g} held by the vLLM engines); each embed "
                f"actor asks for {gpus:g}",
                field="--gpus-per-embedder",
            )
        return max(1, int(total // gpus)), spec
    actors = opts.for_cluster(resources).workers
    assert actors is not None  # for_cluster sizes it
    if isinstance(spec, EmbedderSpec) and spec.threads is None and not spec.remote:
        cpus = int(resources.get("CPU", 1))
        spec = spec.override(threads=max(1, cpus // actors))
    return actors, spec


def _vllm_stages(ds, cfg: BackfillConfig, opts: RayOptions, root: str, shards: int, pool):
    import ray

    from mnemoray.pipeline.llm import (
        FinishDistill,
        PlanPrompts,
        build_llm_stage,
        sampling_params,
        split_options,
    )

    model, sampling, engine_kwargs = split_options(cfg.summarizer_options)
    max_tokens = int(sampling.get("max_tokens", 512))
    params = sampling_params(
        max_tokens, float(sampling.get("temperature", 0.0)), bool(sampling.get("guided_json", True))
    )
    ds = ds.map_batches(
        PlanPrompts,
        batch_size=opts.batch_size,
        batch_format="pyarrow",
        compute=pool,
        num_cpus=opts.actor_cpus,
        fn_constructor_kwargs={"model": model},
    )
    assert opts.llm_concurrency is not None and opts.llm_batch_size is not None  # resolved
    ds = build_llm_stage(
        model,
        params,
        engine_kwargs,
        concurrency=opts.llm_concurrency,
        batch_size=opts.llm_batch_size,
    )(ds)
    return ds.map_batches(
        FinishDistill,
        batch_size=opts.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=opts.workers),
        num_cpus=opts.actor_cpus,
        fn_constructor_kwargs={
            "store_dir": root,
            "shards": shards,
            "max_tokens": max_tokens,
            "fallback": sampling.get("fallback"),
            "chunk_turns": cfg.chunk_turns,
            "ttl_s": cfg.ttl_s,
            "scopes": cfg.scopes,
        },
    )


# -- the engine -----------------------------------------------------------------------
class RayDataEngine:
    """Chunks prepared by a Ray Data flow; the core driver commits them on this process."""

    name = "ray_data"

    def check(self, config: BackfillConfig) -> None:
        if not isinstance(config.summarizer, str):
            raise InvalidInput(
                "the Ray Data engine builds the summarizer in its workers; pass a name",
                field="summarizer",
            )
        if config.summarizer == "vllm" and config.summarize:
            from mnemoray.pipeline.llm import require_vllm, split_options

            require_vllm()
            split_options(config.summarizer_options)  # model= given?

    def open(self, config: BackfillConfig, store: MemoryBackend) -> Iterator[Chunk]:
        from mnemoray.pipeline.read import file_rows

        opts = (config.ray or RayOptions()).resolved()
        spec = embed_spec(config, opts, store)
        files = file_rows(config.archive)  # a missing archive fails here, before Ray starts
        return self._chunks(config, opts, store, spec, files)

    def _chunks(
        self,
        cfg: BackfillConfig,
        opts: RayOptions,
        store: MemoryBackend,
        spec: EmbedderSpec | Embedder | None,
        files: list[dict[str, str]],
    ) -> Iterator[Chunk]:
        if not files:
            return
        from mnemoray.pipeline.write import CHUNK

        started_ray = connect(opts.address)
        import ray

        opts = opts.for_cluster(ray.cluster_resources())  # workers sized for this cluster

        ctx = ray.data.DataContext.get_current()
        restore: tuple[Any, bool, bool, Any] = (
            ctx,
            ctx.execution_options.preserve_order,
            ctx.enable_progress_bars,
            ctx.target_max_block_size,
        )
        try:
            ctx.execution_options.preserve_order = True  # commit in archive order
            ctx.enable_progress_bars = False  # the driver's progress line says it all
            # A read task buffers its file's rows up to this before the repartition cuts
            # them into batches: it bounds that memory and the wait for the first batch.
            ctx.target_max_block_size = min(ctx.target_max_block_size or BLOCK_BYTES, BLOCK_BYTES)
            # Each block as soon as it is ready: with prefetching (iter_rows' default) a
            # prepared chunk reaches the commit only once the NEXT one is ready too.
            for batch in build_dataset(cfg, opts, store, spec, files).iter_batches(
                batch_size=None, prefetch_batches=0, batch_format="pyarrow"
            ):
                for blob in batch.column(CHUNK).to_pylist():
                    chunk = pickle.loads(blob)
                    chunk.stats["resolved"] = {"workers": opts.workers}  # in the run report
                    yield chunk
        finally:  # this process may run other Ray Data work afterwards
            ctx, order, bars, block = restore
            ctx.execution_options.preserve_order, ctx.enable_progress_bars = order, bars
            ctx.target_max_block_size = block
            if started_ray:
                ray.shutdown()


def embed_spec(
    config: BackfillConfig, opts: RayOptions, store: MemoryBackend
) -> EmbedderSpec | Embedder | None:
    """What the embed actors open (None: keyword-only), resolved against the store here,
    so a model the store does not use fails before Ray starts."""
    if isinstance(config.embedder, Embedder):
        return config.embedder
    spec = resolve_spec(config.embedder, store)
    return None if spec is None else on_gpus(spec, opts.gpus_per_embedder)


def engine(name: str) -> Engine:
    """The engine called ``name``: ``in_process`` or ``ray_data``."""
    if name == "in_process":
        return InProcessEngine()
    if name == "ray_data":
        return RayDataEngine()
    raise InvalidInput(f"one of {', '.join(ENGINES)}, got {name!r}", field="engine")


__all__ = [
    "ENGINES",
    "LOCAL_ENV",
    "RayDataEngine",
    "build_dataset",
    "connect",
    "embed_layout",
    "embed_spec",
    "engine",
    "llm_gpus",
]
