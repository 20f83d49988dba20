"""A store the Ray Data backfill built gives the same profiles and domain index as one
the in-process backfill built: both are views of the committed memories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mnemoray.backfill import BackfillConfig, RayOptions, backfill
from mnemoray.backfill.archive import write_archive
from mnemoray.memory.service.service import MemoryService
from mnemoray.pipeline.backfill import RayDataEngine
from tests.support.profile_data import SESSIONS, build_store


def views(store: Path) -> list[dict[str, Any]]:
    service = MemoryService.open(store, embedder=None)
    try:
        out = [service.profile("app", u).to_dict() for u in ("alice", "bob")]
        out.append(service.domain("app").to_dict())
    finally:
        service.close()
    for d in out:
        d.pop("store_version")  # the engines commit in chunks of their own
    return out


@pytest.mark.ray
def test_ray_data_backfill_gives_the_same_views(tmp_path: Path, ray_cluster: None) -> None:
    inproc = build_store(tmp_path / "inproc")
    write_archive(SESSIONS, tmp_path / "archive" / "sessions.jsonl")
    backfill(
        BackfillConfig(
            archive=str(tmp_path / "archive"),
            store=str(tmp_path / "ray"),
            shards=2,
            embedder=None,
            commit_every=2,
            progress_interval_s=0.0,
            ray=RayOptions(batch_size=2),
        ),
        RayDataEngine(),
    )
    got = views(tmp_path / "ray")
    assert got[0]["expertise"][0]["topic"] == "parrot"
    assert got == views(inproc)
