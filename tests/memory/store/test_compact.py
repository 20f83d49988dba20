"""Compaction: fewer files, the same search results, dead rows gone, crash-safe."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from mnemoray.cli.main import app
from mnemoray.embedders import Embedder
from mnemoray.faults import CRASH_ENV, CRASH_EXIT_CODE
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import LEDGER_DIR, MANIFEST, TOMBSTONES_DIR
from mnemoray.memory.store.ops.merge import compact_store, segment_files
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from mnemoray.text import words
from tests.support.archive_gen import make_session

ROOT = Path(__file__).resolve().parents[3]
USERS = ["u0", "u1", "u2", "u3"]
QUERIES = [
    "beagle named Max",
    "allergic to peanuts",
    "moved to Madrid",
    "plan 3 topic",
    "cello orchestra",
    "old blue Volvo",
]


class HashEmbedder(Embedder):
    """Bag of hashed words: deterministic, instant, similar texts score similar."""

    model_id = "test-hash-64"
    dim = 64

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = np.full((len(texts), self.dim), 1e-3, dtype=np.float32)
        for i, text in enumerate(texts):
            for w in words(text):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out


def build(store_dir: Path) -> MemoryService:
    """Many small segments: one commit per session, a forget of each kind, expired rows."""
    service = MemoryService(MemoryStore(store_dir, 2), HashEmbedder(), ExtractiveSummarizer())
    for i in range(12):
        service.add_session(make_session(i, users=len(USERS)))
    snap = service.snapshot()
    victim = next(m for m in snap.iter_memories("app", "u1") if m.kind == "chunk")
    assert service.forget_memory("app", "u1", victim.memory_id) == 1
    assert service.forget_session("app", "u2", "s0002") > 0
    # Expired rows live in their own app: until compaction drops them they still
    # count in BM25 statistics of their scope (expiry is masked at query time).
    past = time.time() - 60
    expired = [
        Memory(
            "ttl",
            "u9",
            "s-old",
            "fact",
            f"The user once owned {n} cats.",
            expires_at=past,
            created_at=past - 10,
        )
        for n in (2, 3)
    ]
    service.add_memories(expired)
    service.add_memories([Memory("ttl", "u9", "s-note", "fact", "The user likes jazz cats.")])
    return service


def results(service: MemoryService) -> list:
    out = []
    for user in USERS:
        for q in QUERIES:
            out.append(
                [
                    (r.memory.memory_id, round(r.score, 6))
                    for r in service.search("app", user, q, top_k=5)
                ]
            )
    for q in QUERIES:
        out.append(
            [(r.memory.memory_id, round(r.score, 6)) for r in service.search_app("app", q, top_k=8)]
        )
    ttl = service.search("ttl", "u9", "cats", top_k=5)
    assert [r.memory.text for r in ttl] == ["The user likes jazz cats."]  # never the expired
    return out


def physical_rows(store: MemoryStore) -> int:
    return store.manifest().rows


def test_compact_merges_segments_keeps_results_and_drops_dead_rows(tmp_path: Path) -> None:
    service = build(tmp_path / "store")
    store = service.store
    before = results(service)
    live = store.load().count()
    files_before = segment_files(store)
    m = store.manifest()
    assert sum(len(s) for s in m.segments) > 4 and len(m.ledger) > 4 and m.tombstones
    on_disk = physical_rows(store)
    assert on_disk > live  # forgotten and expired rows are still on disk

    report = compact_store(store)
    assert report.changed and report.segments_after == 2  # one segment per shard
    assert segment_files(store) < files_before and segment_files(store) == 4
    assert report.rows_dropped == on_disk - live and physical_rows(store) == live
    assert report.ledger_files_after == 1 and store.manifest().ledger_sessions == 12
    assert report.tombstones_retired >= 2 and store.manifest().tombstones == []
    assert not list((tmp_path / "store" / TOMBSTONES_DIR).glob("*.jsonl"))
    assert len(list((tmp_path / "store" / LEDGER_DIR).glob("*.parquet"))) == 1
    assert results(service) == before  # the service reloads the new manifest by itself
    assert (
        results(
            MemoryService(MemoryStore(tmp_path / "store"), HashEmbedder(), ExtractiveSummarizer())
        )
        == before
    )
    # Rows are re-sorted by tenant: the loader's contiguity check passes, ranges hold.
    snap = store.load()
    for shard in snap.segments:
        for seg in shard:
            assert seg.entry.index == "flat" and seg.rows == seg.entry.rows
    # The ledger still answers: re-adding a session adds nothing.
    assert service.add_session(make_session(5, users=len(USERS))) == []
    assert store.gc() == []  # old files were deleted right after the commit
    again = compact_store(store)
    assert not again.changed and again.segments_after == 2


def test_compact_crash_before_commit_changes_nothing(tmp_path: Path) -> None:
    service = build(tmp_path / "store")
    store = service.store
    before = results(service)
    manifest = (tmp_path / "store" / MANIFEST).read_bytes()
    files = segment_files(store)
    code = (
        "import sys; from mnemoray.memory.store.ops.merge import compact_store; "
        "from mnemoray.memory.store.parquet.store import MemoryStore; "
        "compact_store(MemoryStore(sys.argv[1]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "store")],
        env={**os.environ, CRASH_ENV: "compact-prepare"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr
    assert "crashing at 'compact-prepare'" in proc.stderr
    assert (tmp_path / "store" / MANIFEST).read_bytes() == manifest  # not committed
    assert segment_files(store) > files  # the merged files exist, unlisted
    assert results(service) == before  # and are never served
    removed = store.gc()
    assert removed and segment_files(store) == files
    assert compact_store(store).changed and results(service) == before


def test_compact_cli(tmp_path: Path) -> None:
    build(tmp_path / "store")
    runner = CliRunner()
    result = runner.invoke(app, ["compact", "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    assert "segments: " in result.stdout and "-> 2\n" in result.stdout
    again = runner.invoke(app, ["compact", "--store", str(tmp_path / "store"), "--json"])
    assert again.exit_code == 0 and '"changed": false' in again.stdout
    missing = runner.invoke(app, ["compact", "--store", str(tmp_path / "nope")])
    assert missing.exit_code == 2


def test_compact_leaves_big_segments(tmp_path: Path) -> None:
    service = build(tmp_path / "store")
    report = compact_store(service.store, max_segment_rows=1)
    # Nothing is "small": segments stay; only the ledger files are merged.
    assert report.segments_after == report.segments_before
    assert report.ledger_files_after == 1
