"""What the graph axes cost per recall: one user's long conversation (about 1,000 memories
by default), every benchmark question ranked with and without the user's graph.

Both runs rank the same candidate set with the same query vectors
(``retrieval.rank_candidates``, the whole ranking step), interleaved question by
question so the load of a shared machine falls on both alike; the graph's per-set
index is built before timing (once per snapshot in a server). Prints p50/p95 of each
and of the difference, writes ``benchmarks/results/longconv_latency.json``.

Run: ``.venv/bin/python benchmarks/longconv_latency.py [--sessions 48] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import longconv_bench as bench  # noqa: E402
from benchmarks import longconv_data as data  # noqa: E402
from mnemoray.backfill.archive import read_archive  # noqa: E402
from mnemoray.memory.recall.inputs import user_graph
from mnemoray.memory.recall.retriever import rank_candidates  # noqa: E402
from mnemoray.memory.records.filters import RecallFilters  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "longconv_latency.json"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=48, help="sessions of the one pair")
    p.add_argument("--repeat", type=int, default=5, help="passes over the questions")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    cfg = data.LongConvConfig(pairs=1, sessions=args.sessions, seed=args.seed)
    ds_dir, meta = data.load_or_generate(cfg, bench.CACHE)
    questions = data.read_questions(ds_dir / "questions.jsonl")
    tmp = Path(tempfile.mkdtemp(prefix="longconv-latency-"))
    try:
        service = MemoryService.open(tmp / "store", embedder="default", summarizer="extractive")
        bench.ingest(service, read_archive(ds_dir / "archive"))
        snap = service.snapshot()
        user = questions[0]["user_id"]
        cands = service.retriever.user_candidates(snap, cfg.app_name, user)
        graph = user_graph(snap, cfg.app_name, user)
        assert graph is not None and graph.entities, "the store kept no graph"
        vectors = service.embedder.encode([q["question"] for q in questions])
        flt, config = RecallFilters(), service.config
        runs: dict[str, list[float]] = {"without graph": [], "with graph": []}

        def once(q: dict, vec: object, g: object) -> float:
            t = time.perf_counter()
            rank_candidates(cands, q["question"], vec, bench.TOP_K, flt, config, "hybrid", graph=g)  # type: ignore[arg-type]
            return (time.perf_counter() - t) * 1000

        for q, vec in zip(questions, vectors, strict=True):  # warm: indexes built once
            once(q, vec, graph)
            once(q, vec, None)
        diffs = []
        for _ in range(args.repeat):
            for q, vec in zip(questions, vectors, strict=True):
                a, b = once(q, vec, None), once(q, vec, graph)
                runs["without graph"].append(a)
                runs["with graph"].append(b)
                diffs.append(b - a)
        result = {
            "benchmark": "longconv_latency",
            "memories": cands.size,
            "graph": {"entities": len(graph.entities), "relations": len(graph.relations)},
            "questions": len(questions),
            "repeat": args.repeat,
            "ms": {
                k: {
                    "p50": round(pct(v, 50), 3),
                    "p95": round(pct(v, 95), 3),
                    "mean": round(statistics.mean(v), 3),
                }
                for k, v in runs.items()
            },
            "added_ms": {
                "p50": round(pct(diffs, 50), 3),
                "p95": round(pct(diffs, 95), 3),
                "mean": round(statistics.mean(diffs), 3),
            },
            "machine": bench.machine_info(),
            "load_avg": list(os.getloadavg()),
        }
        service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{result['memories']} memories, {result['graph']['entities']} entities, "
        f"{result['graph']['relations']} relations; {result['questions']} questions "
        f"x {args.repeat}"
    )
    for k, v in {**result["ms"], "added by the graph": result["added_ms"]}.items():
        print(f"{k:20s} p50 {v['p50']:7.3f} ms  p95 {v['p95']:7.3f} ms  mean {v['mean']:7.3f} ms")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
