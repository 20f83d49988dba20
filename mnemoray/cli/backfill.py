"""`mnemoray backfill`: distill an archive into a memory store (Ray Data or in process)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from mnemoray.cli.common import SummarizerName, error_line


def backfill_cmd(
    archive: Path = typer.Option(
        ...,
        "--archive",
        exists=True,
        help="Parquet/JSONL/ADK-JSON session archive (file or directory).",
    ),
    store: str = typer.Option(
        ...,
        "--store",
        help="Memory store directory, parquet://DIR or lancedb://DIR (created if new).",
    ),
    shards: int | None = typer.Option(
        None,
        "--shards",
        min=1,
        help="Shards of a new store (default 8; an existing store keeps its own).",
    ),
    summarizer: SummarizerName = typer.Option(
        "extractive", "--summarizer", help="Summarizer backend; its options by --summarizer-option."
    ),
    summarizer_options: list[str] | None = typer.Option(
        None,
        "--summarizer-option",
        help="KEY=VALUE for the summarizer backend (repeatable), "
        "e.g. model=/models/qwen, max_tokens=512, fallback=extractive; JSON values allowed.",
    ),
    no_summarize: bool = typer.Option(
        False,
        "--no-summarize",
        help="Store raw chunks only: no session summaries or facts, no summarizer run.",
    ),
    embedder: str = typer.Option(
        "default",
        "--embedder",
        help="Embedder spec: 'default' (the store's model, MiniLM for "
        "a new store), 'none' (keyword-only), 'torch', 'onnx', or a "
        "local model path / hub name; options after commas, e.g. "
        "'default,runtime=torch,threads=2'.",
    ),
    commit_every: int = typer.Option(
        256,
        "--commit-every",
        "--batch-sessions",
        min=1,
        help="Sessions per commit (a killed job keeps every committed chunk).",
    ),
    in_process: bool = typer.Option(
        False,
        "--in-process",
        help="Run every step in this process instead of on Ray "
        "Data (the Ray-only flags below are then refused).",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="Ray: the cluster to run on (default: "
        "RAY_ADDRESS if set, as under `ray job submit`, "
        "else a new local Ray instance).",
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="Ray: actors per pool (distill; embed on CPU, "
        "sharing the cluster's cores) (default: half the "
        "cluster's CPUs, 1 on 2 cores).",
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Ray: sessions per distill/embed batch (default 64)."
    ),
    gpus_per_embedder: float | None = typer.Option(
        None,
        "--gpus-per-embedder",
        min=0.0,
        help="Ray: GPUs per embedding actor (default 0: CPU); actors fill every GPU.",
    ),
    embed_batch_size: int | None = typer.Option(
        None,
        "--embed-batch-size",
        min=1,
        help="Ray: sessions per embed batch (default: --batch-size on CPU, 1024 on a GPU).",
    ),
    embed_dtype: str | None = typer.Option(
        None,
        "--embed-dtype",
        help="GPU embedder precision: auto, float32, "
        "float16, bfloat16 (half only through the parity "
        "gate; default auto).",
    ),
    embed_batch_tokens: int | None = typer.Option(
        None,
        "--embed-batch-tokens",
        min=1,
        help="Padded tokens per embedding forward pass (GPU default 65536; ONNX 1024).",
    ),
    llm_concurrency: int | None = typer.Option(
        None,
        "--llm-concurrency",
        min=1,
        help="Ray, --summarizer vllm: vLLM engine replicas (default 1).",
    ),
    llm_batch_size: int | None = typer.Option(
        None,
        "--llm-batch-size",
        min=1,
        help="Ray, --summarizer vllm: rows per engine batch (default 64).",
    ),
    progress_every: float = typer.Option(
        10.0,
        "--progress-every",
        min=0.0,
        help="Seconds between progress lines when stderr is not a terminal.",
    ),
    config_file: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        help="Settings file (YAML/JSON): its scopes group "
        "says whose memories they are (memory_scope).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Distill archived sessions into a memory store (idempotent; bad rows are quarantined).

    Runs on Ray Data (a local Ray instance unless --ray-address / RAY_ADDRESS
    says otherwise); --in-process runs the same steps in this process.
    """
    from mnemoray.backfill import BackfillConfig
    from mnemoray.jobs.backfill import RUN_ERRORS, run

    try:
        config = BackfillConfig.from_flags(
            archive=str(archive),
            store=str(store),
            shards=shards,
            summarizer=summarizer,
            summarizer_options=summarizer_options or [],
            summarize=not no_summarize,
            embedder=embedder,
            commit_every=commit_every,
            progress_interval_s=progress_every,
            workers=workers,
            batch_size=batch_size,
            gpus_per_embedder=gpus_per_embedder,
            embed_batch_size=embed_batch_size,
            embed_dtype=embed_dtype,
            embed_batch_tokens=embed_batch_tokens,
            llm_concurrency=llm_concurrency,
            llm_batch_size=llm_batch_size,
            ray_address=ray_address,
            config=config_file,
        )
        config.check()  # a bad flag fails here, before Ray starts
        report = run(config, "in_process" if in_process else "ray_data")
    except RUN_ERRORS as exc:
        typer.echo(error_line(exc), err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(report.to_dict()) if as_json else report.summary())
