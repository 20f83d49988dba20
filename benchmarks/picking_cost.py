"""What picking and the speaker axis cost per recall, interleaved on one store.

On the LongMemEval store that ``longmemeval_bench.py`` built and cached (about 1,600
memories per user, the benchmark's questions as of their dates), every question is
recalled (hybrid, top 10, query vectors embedded once beforehand) in rounds that
alternate

- ``current``: recall as shipped (:mod:`mnemoray.memory.recall.picking` picks the
  results, the ``speaker`` signal is on);
- ``plain``: the same ranking with neither: the best ``top_k`` positions as they
  rank, speaker weight 0,

so a load change on a shared machine hits both alike. It prints p50 / p95 per variant
and their ratio and writes ``benchmarks/results/picking_cost.json``.

Run: ``.venv/bin/python benchmarks/picking_cost.py [--rounds 5]`` after
``longmemeval_bench.py`` has built its store (``--cache`` as there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import longmemeval_data as lme  # noqa: E402
from benchmarks.longconv_bench import commit_info, machine_info  # noqa: E402
from benchmarks.longmemeval_bench import CACHE, DATA, fingerprint  # noqa: E402
from mnemoray.memory.recall import picking, retriever  # noqa: E402
from mnemoray.memory.recall.config import RetrievalConfig  # noqa: E402
from mnemoray.memory.recall.speakers import Side  # noqa: E402
from mnemoray.memory.records.record import Memory  # noqa: E402
from mnemoray.memory.service.service import MemoryService  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "picking_cost.json"
TOP_K = 10


def plain_pick(
    order: Sequence[int],
    memories: Callable[[Sequence[int]], list[Memory]],
    top_k: int,
    budget_tokens: int | None = None,
    *,
    same_words: bool = True,
    turn_chunks: Callable[[int], Sequence[int]] | None = None,
    join_side: Side | None = None,
) -> list[picking.Pick]:
    """The best ``top_k`` as they rank: what recall returns without picking."""
    return [picking.Pick(p, p) for p in order[:top_k]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--cache", type=Path, default=CACHE)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    sha = lme.file_sha256(args.data)
    store = args.cache / f"longmemeval-{fingerprint(sha)}" / "store"
    if not store.exists():
        p.error(f"no cached LongMemEval store at {store}: run longmemeval_bench.py first")
    hays = [lme.haystack(item) for item in lme.load(args.data)]
    service = MemoryService.open(store, embedder="default", summarizer="extractive")
    assert service.embedder is not None
    plain = MemoryService(
        service.store,
        service.embedder,
        service.summarizer,
        RetrievalConfig(weights={"speaker": 0.0}),
    )
    asks = [(h, service.embedder.encode([h.question])[0]) for h in hays]
    variants: dict[str, tuple[MemoryService, Any]] = {
        "current": (service, picking.pick),
        "plain": (plain, plain_pick),
    }
    ms: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds + 1):  # round 0 warms every user's candidate set
        for name, (svc, pick) in variants.items():
            retriever.pick = pick  # type: ignore[assignment]
            for hay, vec in asks:
                request = svc.resolve(
                    lme.APP, hay.user_id, hay.question, TOP_K, mode="hybrid", now=hay.asked_at
                )
                t0 = time.perf_counter()
                svc.recall(request, query_vec=vec)
                if r:
                    ms[name].append((time.perf_counter() - t0) * 1000)
    retriever.pick = picking.pick  # type: ignore[assignment]

    def q(values: list[float], share: float) -> float:
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 3)

    table = {
        name: {
            "recalls": len(v),
            "p50_ms": round(statistics.median(v), 3),
            "p95_ms": q(v, 0.95),
        }
        for name, v in ms.items()
    }
    ratio = round(table["current"]["p50_ms"] / table["plain"]["p50_ms"], 3)
    print(f"{'variant':10s} {'recalls':>8s} {'p50 ms':>8s} {'p95 ms':>8s}")
    for name, row in table.items():
        print(f"{name:10s} {row['recalls']:8d} {row['p50_ms']:8.3f} {row['p95_ms']:8.3f}")
    print(f"current / plain p50: {ratio}")
    memories = service.snapshot().count(lme.APP)
    service.close()
    result = {
        "benchmark": "picking_cost",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit_info(),
        "machine": machine_info(),
        "store": {"memories": memories, "users": len(hays)},
        "config": {"rounds": args.rounds, "top_k": TOP_K, "mode": "hybrid"},
        "variants": table,
        "p50_ratio": ratio,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
