"""More than one Ray node: a head and two worker nodes on this machine
(``tests/support/multinode.py``, in its own process), running the backfill, the Serve
app, and a backfill that loses a node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnemoray.backfill.placement import actor_rows, merge_actors
from mnemoray.pipeline.rows import merge_stats

REPO = Path(__file__).resolve().parents[2]


def test_actor_tallies_fold_per_actor() -> None:
    def tally(actor: str, stage: str, node: str, n: int) -> dict:
        key = f"{actor}@{node}"
        return {"actors": {key: {"stage": stage, "actor": actor, "node": node, "sessions": n}}}

    merged = merge_stats(
        [
            tally("x", "distill", "n1", 2),
            tally("x", "distill", "n1", 3),
            tally("y", "embed", "n2", 5),
            tally("x", "distill", "n3", 1),  # restarted on another node: its own row
            {"read": 4},
        ]
    )
    assert merged["read"] == 4
    assert actor_rows(merged["actors"]) == [
        {"stage": "distill", "actor": "x", "node": "n1", "sessions": 5},
        {"stage": "distill", "actor": "x", "node": "n3", "sessions": 1},
        {"stage": "embed", "actor": "y", "node": "n2", "sessions": 5},
    ]
    assert "actors" not in merge_stats([{"read": 1}])  # in process: no placement
    assert merge_actors([None, {}]) == {}


@pytest.mark.ray
def test_three_nodes_backfill_serve_and_a_lost_node(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.multinode", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "RAY_ADDRESS": ""},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["nodes"] == ["head", "node_a", "node_b"]

    # The backfill's distill and embed actors ran on more than one node, each named with
    # what it did, and the store is the single-node run's, memory for memory.
    run = out["backfill"]
    for stage in ("distill", "embed"):
        mine = [a for a in run["actors"] if a["stage"] == stage]
        assert len({a["node"] for a in mine}) >= 2, run["actors"]
        assert sum(a["sessions"] for a in mine) >= 16
    assert run["store"]["same"] and run["store"]["memories"] == run["memories_written"] > 0

    # Serve: ingress replicas on two nodes; a memory added after both started is found by
    # every recall, and both replicas answered some.
    served = out["serve"]
    assert len(set(served["replica_nodes"])) == 2
    assert served["added_status"] == 201
    assert served["recalls_with_memory"] == served["recalls"] > 0
    assert len(served["recalls_by_replica"]) == 2 and min(served["recalls_by_replica"]) > 0

    # A worker node removed mid-run: that run finished or failed with a clear error; the
    # re-run completed it, and the store is the single-node one (no duplicate, no loss).
    lost = out["node_loss"]
    assert lost["first"]["status"] in ("succeeded", "failed"), lost
    assert lost["running_at_removal"] and 0 < lost["removed_after_sessions"] < 16, lost
    if lost["first"]["status"] == "failed":
        assert lost["first"]["error"].strip(), lost
    else:  # Ray restarted the lost node's actors on the others, and the run went on
        assert {"node_b", "node_a"} <= set(lost["first"]["actor_nodes"]), lost
    assert lost["rerun_written"] == 0 or lost["first"]["status"] == "failed", lost
    assert lost["store"]["same"], lost
