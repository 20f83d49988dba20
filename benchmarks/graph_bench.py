"""Graph traversal latency at 10K and 100K entities (target: 3-hop p95 under 20 ms at 100K).

Synthetic graph shaped like a long-lived user's memory graph:

- ``N`` entities and ``N`` memories; every entity is mentioned by one memory, and each
  memory ``mentions`` 1 + Poisson(2) more entities drawn from a Zipf-like popularity
  (rank^-1.1): a few hubs (the two speakers, a home town) are in most memories, most
  entities in one or two;
- every memory has a ``same_period`` edge to one of 60 month entities;
- ``N/2`` typed facts between entities (lives_in, works_at, owns, sister_of, ...),
  endpoints by the same popularity; a third of them closed (``valid_to`` set), the
  rest open, starts spread over five years.

The graph is written as the store's Parquet tables (``GraphStore.write_tables``), read
back with ``GraphStore.load_index`` (the path Serve takes), and each query walks from an
entity, drawn uniformly ("any": mostly rare ones) or by popularity ("popular": what
questions name most): depth 1, 2, 3, with no filter, a type filter (typed facts and
mentions), a time filter (valid at a random instant), and both. Timings are of
``GraphIndex.neighbours`` (the walk; ids of the nodes are not materialised).

Run: ``.venv/bin/python benchmarks/graph_bench.py`` (``--quick``: 10K only, fewer
queries). Prints a table and writes ``benchmarks/results/graph.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mnemoray.memory.store.graph.tables import SCHEMAS, GraphStore  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "graph.json"
TYPED = ("lives_in", "works_at", "owns", "adopted", "sister_of", "friend_of", "married_to")
T0 = 1.55e9  # world time of the first fact (2019)
SPAN = 5 * 365 * 86400.0


def synthetic(n: int, seed: int = 7) -> dict[str, pa.Table]:
    """Entity, alias and relation tables of one user with ``n`` entities."""
    rng = np.random.default_rng(seed)
    ent = np.array([f"ent-{i:07d}" for i in range(n)], dtype=object)
    mem = np.array([f"mem-{i:07d}" for i in range(n)], dtype=object)
    weights = 1.0 / np.arange(1, n + 1) ** 1.1
    weights /= weights.sum()
    # Every entity was named somewhere once; then each memory names 1 + Poisson(2)
    # entities by popularity.
    per = 1 + rng.poisson(2.0, n)
    m_src = np.concatenate([mem[rng.integers(0, n, n)], np.repeat(mem, per)])
    m_dst = np.concatenate([ent, ent[rng.choice(n, size=int(per.sum()), p=weights)]])
    months = ent[n - 60 :]  # the last 60 entities stand for months
    p_src, p_dst = mem, months[rng.integers(0, 60, n)]
    k = n // 2
    f_src, f_dst = ent[rng.choice(n, k, p=weights)], ent[rng.choice(n, k, p=weights)]
    f_type = np.array(TYPED, dtype=object)[rng.integers(0, len(TYPED), k)]
    start = T0 + rng.random(k) * SPAN
    closed = rng.random(k) < 1 / 3
    end = np.where(closed, start + rng.random(k) * 365 * 86400, np.nan)
    src = np.concatenate([m_src, p_src, f_src])
    dst = np.concatenate([m_dst, p_dst, f_dst])
    m = src.size
    types = np.concatenate(
        [
            np.full(m_src.size, "mentions", dtype=object),
            np.full(n, "same_period", dtype=object),
            f_type,
        ]
    )
    nan = np.full(m - k, np.nan)
    vf, vt = np.concatenate([nan, start]), np.concatenate([nan, end])
    kinds = np.where(np.char.startswith(src.astype(str), "mem-"), "memory", "entity")
    common = {"app_name": pa.array(["bench"] * m), "user_id": pa.array(["u"] * m)}
    relations = pa.table(
        {
            "relation_id": pa.array([f"rel-{i:08d}" for i in range(m)]),
            **common,
            "src": pa.array(src.tolist()),
            "src_kind": pa.array(kinds.tolist()),
            "type": pa.array(types.tolist()),
            "dst": pa.array(dst.tolist()),
            "dst_kind": pa.array(["entity"] * m),
            "strength": pa.array(np.ones(m)),
            "confidence": pa.array(np.ones(m)),
            "valid_from": pa.array(vf, from_pandas=True),
            "valid_to": pa.array(vt, from_pandas=True),
            "ended_by": pa.array([""] * m),
            "recorded_at": pa.array(np.full(m, T0)),
            "supports": pa.nulls(m, SCHEMAS["relations"].field("supports").type),
            "evidence": pa.array([""] * m),
            "version": pa.array(np.ones(m, dtype=np.int64)),
            "changed_by": pa.array([""] * m),
        },
        schema=SCHEMAS["relations"],
    )
    entities = pa.table(
        {
            "entity_id": pa.array(ent.tolist()),
            "app_name": pa.array(["bench"] * n),
            "user_id": pa.array(["u"] * n),
            "name": pa.array([f"Name {i}" for i in range(n)]),
            "type": pa.array(["thing"] * n),
        }
    ).select(["entity_id", "app_name", "user_id", "name", "type"])
    entities = _fill(entities, SCHEMAS["entities"])
    return {
        "entities": entities,
        "aliases": SCHEMAS["aliases"].empty_table(),
        "relations": relations,
    }


def _fill(table: pa.Table, schema: pa.Schema) -> pa.Table:
    cols = {
        f.name: table[f.name] if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    }
    return pa.table(cols, schema=schema)


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 3)


def run_size(n: int, queries: int, seed: int = 11) -> dict[str, Any]:
    tables = synthetic(n)
    with tempfile.TemporaryDirectory() as tmp:
        store = GraphStore(tmp, shards=1)
        t = time.perf_counter()
        store.write_tables(0, tables)
        write_s = time.perf_counter() - t
        t = time.perf_counter()
        index = store.load_index("bench", "u")
        load_s = time.perf_counter() - t
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n + 1) ** 1.1
    drawn = {
        "any": rng.integers(0, n, queries),
        "popular": rng.choice(n, queries, p=weights / weights.sum()),
    }
    instants = T0 + rng.random(queries) * SPAN
    filters = {
        "none": (None, False),
        "type": ((*TYPED, "mentions"), False),
        "time": (None, True),
        "type+time": ((*TYPED, "mentions"), True),
    }
    rows = []
    for kind, picks in drawn.items():
        starts = [f"ent-{i:07d}" for i in picks]
        for depth, (name, (types, timed)) in itertools.product((1, 2, 3), filters.items()):
            index.neighbours(starts[0], depth=depth, types=types)  # warm
            took, reached = [], []
            for q, start in enumerate(starts):
                at = float(instants[q]) if timed else None
                t = time.perf_counter()
                near = index.neighbours(start, depth=depth, types=types, at=at)
                took.append(time.perf_counter() - t)
                reached.append(len(near))
            rows.append(
                {
                    "entities": n,
                    "start": kind,
                    "depth": depth,
                    "filter": name,
                    "queries": queries,
                    "p50_ms": _pct(took, 50),
                    "p95_ms": _pct(took, 95),
                    "max_ms": _pct(took, 100),
                    "reached_median": int(np.median(reached)),
                    "reached_p95": int(np.percentile(reached, 95)),
                }
            )
    return {
        "entities": n,
        "memories": n,
        "nodes": index.node_count,
        "relations": index.relation_count,
        "write_s": round(write_s, 3),
        "load_index_s": round(load_s, 3),
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10K entities, 100 queries")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--sizes", default="10000,100000", help="entity counts, comma-separated")
    args = ap.parse_args()
    sizes = [10_000] if args.quick else [int(x) for x in args.sizes.split(",")]
    queries = 100 if args.quick else args.queries
    results = [run_size(n, queries) for n in sizes]
    print(
        f"{'entities':>9} {'start':>8} {'depth':>5} {'filter':>10} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'max ms':>8} {'reached p50':>11}"
    )
    for size in results:
        print(
            f"# {size['entities']} entities, {size['nodes']} nodes, {size['relations']} "
            f"relations; write {size['write_s']} s, load_index {size['load_index_s']} s"
        )
        for r in size["rows"]:
            print(
                f"{r['entities']:>9} {r['start']:>8} {r['depth']:>5} {r['filter']:>10} "
                f"{r['p50_ms']:>8} "
                f"{r['p95_ms']:>8} {r['max_ms']:>8} {r['reached_median']:>11}"
            )
    if not args.quick and sizes == [10_000, 100_000]:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps(
                {
                    "machine": {
                        "python": platform.python_version(),
                        "cpus": os.cpu_count(),
                        "platform": platform.platform(),
                    },
                    "queries_per_row": queries,
                    "sizes": results,
                },
                indent=1,
            )
            + "\n"
        )
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
