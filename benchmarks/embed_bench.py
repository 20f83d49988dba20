"""Embedding latency / throughput: torch vs ONNX Runtime fp32 vs ONNX Runtime int8.

For the packaged all-MiniLM-L6-v2, with torch intra-op threads and ONNX Runtime
intra-op threads set to 1 and to 2, it measures through the public
``Embedder.encode`` (tokenisation, inference, normalisation included):

- single-query latency p50/p95: batch 1, short queries (4-10 words), the recall
  endpoint's hot path;
- batch throughput: texts/s encoding 64 texts of ~60 words at batch_size=64;
- parity: minimum cosine vs torch over the queries and batch texts used here
  (the int8 model fails the 0.999 gate, so it runs with ``verify=False`` and an
  ``-unverified`` model id; the library refuses it otherwise).

The configurations are measured interleaved, round by round, so a load change on a
shared machine hits all of them alike: compare ratios within one run.

Run: ``.venv/bin/python benchmarks/embed_bench.py`` -> table on stdout and
``benchmarks/results/embed.json``. With ``--device cuda`` it measures the GPU instead
(``benchmarks/embed_gpu.py``: the limit probe, the packed CUDA embedder, plain
sentence-transformers; ``benchmarks/results/embed_gpu.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from mnemoray.embedders import PARITY_MIN_COSINE, OnnxEmbedder, SentenceTransformerEmbedder

RESULTS = Path(__file__).parent / "results" / "embed.json"
THREADS = (1, 2)
BATCH = 64
BATCH_WORDS = 60

VOCABULARY = """
user prefers window seat flight booking hotel Paris Berlin meeting tomorrow budget report
quarter invoice refund customer ticket escalation support manager deploy service cluster
replica latency memory recall summary agent session tool call error retry python ray serve
parrot apartment lease doctor appointment birthday sister dinner restaurant vegetarian
allergy peanuts gym schedule morning running marathon training plan project deadline
"""
FUNCTION_WORDS = "the a to of and for with on in my your this that is was will can please"
GLUE = FUNCTION_WORDS.split()
WORDS = VOCABULARY.split()


def make_texts(seed: int = 7) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)

    def sentence(n: int) -> str:
        return " ".join(rng.choice(WORDS if i % 3 else GLUE) for i in range(n))

    queries = [sentence(rng.randint(4, 10)) + "?" for _ in range(64)]
    batch = [sentence(BATCH_WORDS).capitalize() + "." for _ in range(BATCH)]
    return queries, batch


class Config:
    def __init__(self, name: str, backend: str, threads: int, embedder) -> None:
        self.name, self.backend, self.threads, self.embedder = name, backend, threads, embedder
        self.single: list[float] = []
        self.batch: list[float] = []

    def prepare(self) -> None:
        if self.backend == "torch":
            import torch

            torch.set_num_threads(self.threads)  # process-wide: set before each turn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--singles-per-round", type=int, default=25)
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="ONNX export cache (default: $MNEMORAY_ONNX_CACHE or ~/.cache/mnemoray/onnx)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="cuda: the GPU benchmark (benchmarks/embed_gpu.py)",
    )
    parser.add_argument("--texts", type=int, default=100_000, help="cuda: turns to embed")
    parser.add_argument("--users", type=int, default=1000, help="cuda: datagen users")
    parser.add_argument(
        "--batch-tokens", type=int, default=65536, help="cuda: padded tokens per forward pass"
    )
    parser.add_argument("--repeats", type=int, default=3, help="cuda: timed runs each")
    args = parser.parse_args()
    if args.device == "cuda":
        from benchmarks import embed_gpu

        args.out = args.out or embed_gpu.RESULTS
        embed_gpu.run(args)
        return
    args.out = args.out or RESULTS

    queries, batch = make_texts()
    load_start = os.getloadavg()
    started = time.perf_counter()
    torch_embedder = SentenceTransformerEmbedder()
    configs: list[Config] = []
    for threads in THREADS:
        configs.append(Config(f"torch t{threads}", "torch", threads, torch_embedder))
    for threads in THREADS:
        configs.append(
            Config(
                f"onnx fp32 t{threads}",
                "onnx-fp32",
                threads,
                OnnxEmbedder(threads=threads, cache_dir=args.cache_dir, reference=torch_embedder),
            )
        )
    for threads in THREADS:
        # verify=False: the int8 export fails the parity gate, measured below anyway.
        configs.append(
            Config(
                f"onnx int8 t{threads}",
                "onnx-int8",
                threads,
                OnnxEmbedder(
                    quantize=True, threads=threads, cache_dir=args.cache_dir, verify=False
                ),
            )
        )
    print(f"loaded in {time.perf_counter() - started:.1f} s; load average {load_start}")

    # Parity on this benchmark's own texts (the library's gate uses its built-in set).
    texts = queries + batch
    reference = torch_embedder.encode(texts)
    parity = {}
    for cfg in configs:
        if cfg.backend != "torch" and cfg.backend not in parity:
            got = cfg.embedder.encode(texts, batch_size=BATCH)
            parity[cfg.backend] = float(np.min(np.sum(got * reference, axis=1)))

    for cfg in configs:  # warm-up: first-call allocations, thread pools
        cfg.prepare()
        for q in queries[:10]:
            cfg.embedder.encode([q])
        cfg.embedder.encode(batch, batch_size=BATCH)

    q = 0
    for _ in range(args.rounds):
        for cfg in configs:
            cfg.prepare()
            for _ in range(args.singles_per_round):
                text = [queries[q % len(queries)]]
                q += 1
                t0 = time.perf_counter()
                cfg.embedder.encode(text)
                cfg.single.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            cfg.embedder.encode(batch, batch_size=BATCH)
            cfg.batch.append(time.perf_counter() - t0)

    rows = []
    torch_p50 = {
        c.threads: float(np.percentile(c.single, 50)) for c in configs if c.backend == "torch"
    }
    torch_tps = {
        c.threads: BATCH / float(np.median(c.batch)) for c in configs if c.backend == "torch"
    }
    for cfg in configs:
        p50 = float(np.percentile(cfg.single, 50)) * 1e3
        p95 = float(np.percentile(cfg.single, 95)) * 1e3
        tps = BATCH / float(np.median(cfg.batch))
        min_cos = parity.get(cfg.backend, 1.0)
        gate = getattr(cfg.embedder, "verified", True)
        rows.append(
            {
                "config": cfg.name,
                "backend": cfg.backend,
                "threads": cfg.threads,
                "single_p50_ms": round(p50, 3),
                "single_p95_ms": round(p95, 3),
                "single_speedup_vs_torch": round(torch_p50[cfg.threads] * 1e3 / p50, 2),
                "batch64_texts_per_s": round(tps, 1),
                "batch_speedup_vs_torch": round(tps / torch_tps[cfg.threads], 2),
                "bench_min_cosine_vs_torch": round(min_cos, 6),
                "gate_min_cosine": getattr(cfg.embedder, "parity_min_cosine", None),
                "passes_parity_gate": bool(gate),
                "model_id": cfg.embedder.model_id,
                "single_samples": len(cfg.single),
                "batch_samples": len(cfg.batch),
            }
        )

    header = (
        f"{'config':<14} {'p50 ms':>7} {'p95 ms':>7} {'x torch':>7} {'batch64 t/s':>11} "
        f"{'x torch':>7} {'min cos':>9} {'gate':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['config']:<14} {r['single_p50_ms']:>7.2f} {r['single_p95_ms']:>7.2f} "
            f"{r['single_speedup_vs_torch']:>7.2f} {r['batch64_texts_per_s']:>11.1f} "
            f"{r['batch_speedup_vs_torch']:>7.2f} {r['bench_min_cosine_vs_torch']:>9.5f} "
            f"{'ok' if r['passes_parity_gate'] else 'FAIL':>5}"
        )
    print(
        f"single: batch 1, {len(queries)} short queries cycled; batch: {BATCH} texts of "
        f"~{BATCH_WORDS} words; parity gate: min cosine >= {PARITY_MIN_COSINE}"
    )

    load_end = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "load_average_start": load_start,
                    "load_average_end": load_end,
                },
                "versions": {
                    d: version(d)
                    for d in (
                        "torch",
                        "onnxruntime",
                        "onnx",
                        "tokenizers",
                        "transformers",
                        "sentence-transformers",
                    )
                },
                "settings": {
                    "rounds": args.rounds,
                    "singles_per_round": args.singles_per_round,
                    "batch": BATCH,
                    "batch_words": BATCH_WORDS,
                    "parity_min_cosine": PARITY_MIN_COSINE,
                },
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}; load average at end {load_end}")


if __name__ == "__main__":
    main()
