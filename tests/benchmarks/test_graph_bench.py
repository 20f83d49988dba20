"""The graph benchmark's generator and one small run: every entity is reachable, the
degree distribution has hubs, and each row of the report carries its figures."""

from __future__ import annotations

import numpy as np

from benchmarks import graph_bench


def test_synthetic_graph_shape() -> None:
    tables = graph_bench.synthetic(2000)
    rel = tables["relations"]
    assert tables["entities"].num_rows == 2000
    dst = rel["dst"].to_pylist()
    assert {f"ent-{i:07d}" for i in range(2000)} <= set(dst)  # every entity is mentioned
    counts = np.bincount([int(d[4:]) for d in dst if d.startswith("ent-")])
    assert counts.max() > 50 * np.median(counts)  # hubs and a long tail
    typed = [t for t in rel["type"].to_pylist() if t in graph_bench.TYPED]
    assert len(typed) == 1000


def test_a_small_run_reports_every_row() -> None:
    out = graph_bench.run_size(2000, queries=5)
    assert out["nodes"] == 4000 and out["relations"] > 6000
    rows = out["rows"]
    assert len(rows) == 2 * 3 * 4  # start kinds x depths x filters
    for r in rows:
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["max_ms"]
    deep = [r for r in rows if r["depth"] == 3 and r["start"] == "popular"]
    assert all(r["reached_median"] > 100 for r in deep)
