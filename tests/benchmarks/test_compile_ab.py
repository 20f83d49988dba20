"""benchmarks/compile_ab.py: two checkouts' workers answer in turn and the summary
holds every path's percentiles for each (here this checkout against itself)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import compile_ab

ROOT = Path(__file__).resolve().parents[2]


def test_two_workers_take_turns_on_every_path():
    result = compile_ab.compare(
        {"before": ROOT, "after": ROOT}, ["warm", "empty_cache"], rounds=2, batch=2
    )
    assert set(result["paths"]) == {"warm", "empty_cache"}
    for by in result["paths"].values():
        assert set(by) == {"before", "after"}
        for figures in by.values():
            assert figures["n"] == 4  # two rounds of two compiles
            assert 0 < figures["cpu_p50_ms"] <= figures["cpu_p95_ms"]
            assert 0 < figures["wall_p50_ms"] <= figures["wall_p95_ms"]
    assert result["machine"]["cpus"] >= 1
