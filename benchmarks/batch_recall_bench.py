"""Batch recall throughput: `mnemoray recall --queries FILE` against the raw encoder.

On the recall-quality dataset (``benchmarks/datagen.py``, ingested as
``benchmarks/recall_quality.py`` does, embeddings cached), with the CLI's service
(``mnemoray.cli.store.open_for_recall``: the query embedder on the parity-gated ONNX
runtime), over every dataset query:

- **raw encode**: ``embedder.encode(all queries)`` alone, the rate to approach;
- **one at a time**: ``service.search`` per query, embedding inside (the old batch path);
- **batch**: ``BatchRecall`` (mnemoray.memory.service.batch_recall) at the given batch sizes and
  ranking threads: parse, embed per batch, rank, JSON answers.

Each query is distinct text; the service's query-vector cache is cleared between runs.
Prints a table, writes ``benchmarks/results/batch_recall.json``.

Run: ``.venv/bin/python benchmarks/batch_recall_bench.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import datagen  # noqa: E402
from benchmarks.recall_quality import (  # noqa: E402
    CACHE,
    EmbedCache,
    ingest_batch,
    loadavg,
    machine_info,
)
from mnemoray.backfill.archive import read_archive  # noqa: E402
from mnemoray.cli.store import open_for_recall  # noqa: E402
from mnemoray.memory.service.batch_recall import BatchRecall  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "batch_recall.json"


def build_store(users: int) -> tuple[Path, list[dict[str, Any]]]:
    cfg = datagen.DatasetConfig(users=users)
    ds_dir, meta = datagen.load_or_generate(cfg, CACHE)
    store = CACHE / f"batch-recall-store-{meta['fingerprint']}"
    queries = datagen.read_jsonl(ds_dir / "queries.jsonl")
    if not (store / "manifest.json").exists():
        shutil.rmtree(store, ignore_errors=True)
        service = MemoryService.open(store, embedder="default", summarizer="extractive")
        ingest_batch(service, read_archive(ds_dir / "archive"), EmbedCache(service.embedder))
        service.close()
    return store, queries


def timed(label: str, n: int, fn: Any) -> dict[str, Any]:
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    row = {
        "run": label,
        "queries": n,
        "seconds": round(took, 3),
        "queries_per_s": round(n / took, 1),
    }
    print(f"  {label:34s} {row['seconds']:8.2f} s {row['queries_per_s']:9.1f} q/s", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="40 users instead of 200")
    p.add_argument("--batch-sizes", default="64,256,1024")
    p.add_argument("--workers", default="1,2")
    args = p.parse_args(argv)
    store, every = build_store(40 if args.quick else 200)
    # Distinct texts only: the query-vector cache must not answer any of them.
    seen: set[str] = set()
    queries = [q for q in every if not (q["query"] in seen or seen.add(q["query"]))]
    service = open_for_recall(store, "default")
    lines = [
        json.dumps(
            {
                "qid": i,
                "app_name": q["app_name"],
                "user_id": q["user_id"],
                "query": q["query"],
                "top_k": 10,
            }
        ).encode()
        for i, q in enumerate(queries)
    ]
    texts = [q["query"] for q in queries]
    n = len(lines)
    print(f"{n} distinct queries, store {store.name}, embedder {type(service.embedder).__name__}")
    service.embedder.encode(["warm up"])
    la_start = loadavg()
    rows = [timed("raw encode (one call)", n, lambda: service.embedder.encode(texts))]
    raw = rows[0]["queries_per_s"]

    def one_at_a_time() -> None:
        for q in queries:
            service.search(q["app_name"], q["user_id"], q["query"], 10, recalled=False)

    service.query_cache.clear()
    rows.append(timed("one at a time (search per query)", n, one_at_a_time))
    for workers in (int(w) for w in args.workers.split(",")):
        for size in (int(b) for b in args.batch_sizes.split(",")):
            service.query_cache.clear()
            batch = BatchRecall(service, default_top_k=10, batch_size=size, workers=workers)
            rows.append(
                timed(
                    f"batch {size}, {workers} ranking thread(s)",
                    n,
                    lambda b=batch: [json.dumps(a) for a in b.answers(lines)],
                )
            )
            rows[-1].update(batch_size=size, workers=workers, failed=batch.failed)
    best = max(r["queries_per_s"] for r in rows[2:])
    result = {
        "machine": machine_info(),
        "loadavg": {"start": la_start, "end": loadavg()},
        "store": store.name,
        "queries": n,
        "runs": rows,
        "batch_vs_raw_encode": round(best / raw, 3),
        "batch_vs_one_at_a_time": round(best / rows[1]["queries_per_s"], 2),
    }
    print(
        f"best batch = {result['batch_vs_raw_encode']:.2f} x raw encode, "
        f"{result['batch_vs_one_at_a_time']:.1f} x one at a time"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    service.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
