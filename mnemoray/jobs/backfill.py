"""The backfill as a Ray job: ``python -m mnemoray.jobs.backfill`` (`mnemoray backfill` flags).

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python -m mnemoray.jobs.backfill --archive /data/archive --store /data/store --workers 8

Under `ray job submit` RAY_ADDRESS is set, so the job joins that cluster; run
directly, it starts a local Ray instance like the CLI does. It calls the
backfill's Python API (``mnemoray.backfill.backfill``) and prints its report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from mnemoray.backfill import BackfillConfig, BackfillReport, backfill
from mnemoray.backfill.config import DEFAULT_COMMIT_EVERY
from mnemoray.errors import MnemorayError
from mnemoray.extras import install_hint

PROG = "python -m mnemoray.jobs.backfill"
# What a run ends with as one line, exit 2: a bad flag, store, embedder or archive
# (mnemoray's errors; a library's ValueError on a bad file), or no vLLM installed.
RUN_ERRORS = (MnemorayError, ValueError, ImportError)


def parser() -> argparse.ArgumentParser:
    """The flags of `mnemoray backfill` (see its --help for the full text)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Distill archived sessions into a "
        "memory store (the flags of `mnemoray backfill`).",
    )
    p.add_argument("--archive", required=True, help="Session archive (file or directory).")
    p.add_argument("--store", required=True, help="Memory store directory.")
    p.add_argument("--shards", type=int, default=None, help="Shards of a new store.")
    p.add_argument("--summarizer", default="extractive", help="Summarizer backend name.")
    p.add_argument(
        "--summarizer-option",
        dest="summarizer_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Summarizer option (repeatable).",
    )
    p.add_argument(
        "--no-summarize",
        dest="summarize",
        action="store_false",
        help="Raw chunks only: no summaries or facts, no summarizer run.",
    )
    p.add_argument(
        "--embedder",
        default="default",
        help="Embedder spec ('default', 'none', 'torch', a model path, options after commas).",
    )
    p.add_argument(
        "--embed-dtype",
        default=None,
        help="GPU embedder precision (auto, float32, float16, bfloat16).",
    )
    p.add_argument(
        "--embed-batch-tokens",
        type=int,
        default=None,
        help="Padded tokens per embedding forward pass.",
    )
    p.add_argument(
        "--commit-every",
        "--batch-sessions",
        dest="commit_every",
        type=int,
        default=DEFAULT_COMMIT_EVERY,
        help="Sessions per commit.",
    )
    p.add_argument(
        "--config",
        default=None,
        help="Settings file: its scopes group says whose memories they are (memory_scope).",
    )
    p.add_argument(
        "--in-process", action="store_true", help="Run in this process, not on Ray Data."
    )
    p.add_argument(
        "--progress-every",
        dest="progress_interval_s",
        type=float,
        default=10.0,
        help="Seconds between progress lines when stderr is not a terminal.",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the report as JSON.")
    ray = p.add_argument_group("Ray Data engine only")
    ray.add_argument("--ray-address", default=None, help="Ray cluster to run on.")
    ray.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Most actors per pool (default: half the cluster's CPUs).",
    )
    ray.add_argument(
        "--batch-size", type=int, default=None, help="Sessions per distill/embed batch."
    )
    ray.add_argument(
        "--gpus-per-embedder", type=float, default=None, help="GPUs per embedding actor."
    )
    ray.add_argument("--embed-batch-size", type=int, default=None, help="Sessions per embed batch.")
    ray.add_argument("--llm-concurrency", type=int, default=None, help="vLLM engine replicas.")
    ray.add_argument("--llm-batch-size", type=int, default=None, help="Rows per vLLM batch.")
    return p


def parse(argv: Sequence[str]) -> tuple[BackfillConfig, str, bool]:
    """(config, engine name, --json) from the command line.

    Usage errors exit with status 2 (argparse); a bad value is an ``InvalidInput``.
    """
    flags = vars(parser().parse_args(list(argv)))
    in_process, as_json = flags.pop("in_process"), flags.pop("as_json")
    config = BackfillConfig.from_flags(**flags)
    return config, "in_process" if in_process else "ray_data", as_json


def run(config: BackfillConfig, engine_name: str) -> BackfillReport:
    """The backfill on the named engine (``in_process`` or ``ray_data``)."""
    from mnemoray.pipeline.backfill import engine

    return backfill(config, engine(engine_name))


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    try:
        config, engine_name, as_json = parse(sys.argv[1:] if argv is None else argv)
        report = run(config, engine_name)
    except RUN_ERRORS as exc:
        # A module of a missing extra (ray without [ray]) names the install instead.
        hint = install_hint(exc) if isinstance(exc, ModuleNotFoundError) else None
        print(f"error: {hint or exc}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(report.to_dict()) if as_json else report.summary(), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
