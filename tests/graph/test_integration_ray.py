"""The Ray Data backfill writes the same entity graph as the in-process one, in the
memories' commits, and a rerun adds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.backfill import BackfillConfig, RayOptions, backfill
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.pipeline.backfill import RayDataEngine
from tests.graph.test_integration import archive, graph_state, run_backfill


@pytest.mark.ray
def test_ray_data_backfill_writes_the_graph_with_the_memories(
    tmp_path: Path, ray_cluster: None
) -> None:
    arch = archive(tmp_path)
    run_backfill(arch, tmp_path / "inproc")
    cfg = BackfillConfig(
        archive=str(arch),
        store=str(tmp_path / "ray"),
        shards=2,
        embedder=None,
        commit_every=2,
        progress_interval_s=0.0,
        ray=RayOptions(batch_size=2),
    )
    backfill(cfg, RayDataEngine())
    m = MemoryStore(tmp_path / "ray").manifest()
    seg_versions = {e.version for entries in m.segments for e in entries}
    parts = [p for shard in m.graph for p in shard]
    assert parts and {p.version for p in parts} <= seg_versions
    assert graph_state(tmp_path / "ray") == graph_state(tmp_path / "inproc")

    backfill(cfg, RayDataEngine())  # rerun: every session is in the ledger
    again = MemoryStore(tmp_path / "ray").manifest()
    assert again.version == m.version and again.graph == m.graph
