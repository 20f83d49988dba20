"""benchmarks/backfill_cpu.py runs end to end on a small archive and writes its results."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import backfill_cpu


def test_cpu_per_memory_and_heavy_user(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    assert (
        backfill_cpu.main(
            [
                "--sessions",
                "30",
                "--sessions-per-file",
                "15",
                "--repeats",
                "1",
                "--label",
                "t",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert backfill_cpu.main(["--heavy-user", "12", "--label", "h", "--out", str(out)]) == 0
    first, heavy = json.loads(out.read_text())["results"]
    (run,) = first["runs"]
    assert run["memories"] > 30 and run["cpu_ms_per_memory"] > 0
    assert run["stage_clock"] == "cpu" and {"distill", "write", "commit"} <= set(run["stages"])
    assert [r["sessions"] for r in heavy["heavy_user"]] == [3, 6, 12]
    assert all(r["relations"] > 0 and r["cpu_s"] > 0 for r in heavy["heavy_user"])
