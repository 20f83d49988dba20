"""Corrupt and lost store files are caught, named and repairable, a missing
manifest.json included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.cli.main import app
from mnemoray.errors import StoreCorrupt
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.parquet.store import MemoryStore
from tests.support.archive_gen import make_archive
from tests.support.service_backend import ServiceBackend

runner = CliRunner()
DIM = 16
MODEL = "test-model"
REPAIR = "mnemoray doctor --repair"


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def memories(
    rng: np.random.Generator,
    users: list[str],
    n: int = 3,
    app_name: str = "app",
    note: str = "note",
) -> list[Memory]:
    return [
        Memory(app_name, u, "s0", "fact", f"{u} {note} {i}", created_at=1000.0 + i).with_embedding(
            unit(rng)
        )
        for u in users
        for i in range(n)
    ]


def users_on_two_shards(shards: int = 4) -> tuple[list[str], list[str]]:
    """Users of shard A and users of another shard B (same app)."""
    by: dict[int, list[str]] = {}
    for i in range(200):
        by.setdefault(shard_of("app", f"u{i}", shards), []).append(f"u{i}")
    a, b = sorted(by)[:2]
    return by[a][:3], by[b][:3]


def vector_store(tmp_path: Path) -> tuple[MemoryStore, list[str], list[str]]:
    rng = np.random.default_rng(7)
    a, b = users_on_two_shards()
    store = MemoryStore(tmp_path / "store", shards=4)
    store.write_segment(memories(rng, a + b), MODEL, DIM, session_hashes=["h1", "h2"])
    return store, a, b


def store_ids(store: MemoryStore) -> list[tuple[str, str, str, str]]:
    return sorted(
        (m.app_name, m.user_id, m.memory_id, m.content_hash) for m in store.load().iter_memories()
    )


def backfilled(tmp_path: Path, sessions: int = 12) -> tuple[Path, Path]:
    archive, store = tmp_path / "archive", tmp_path / "store"
    if not archive.exists():
        make_archive(archive, sessions, files=1, bad=False, parquet=False)
    backfill(BackfillConfig(archive, store, embedder=None, shards=4))
    return archive, store


def one_line_error(result: Any) -> str:
    """The CLI's answer: rc != 0, no traceback, one error line."""
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


# -- a lost manifest ------------------------------------------------------------------------
def test_a_store_with_data_but_no_manifest_is_refused_and_gc_deletes_nothing(
    tmp_path: Path,
) -> None:
    store, a, _ = vector_store(tmp_path)
    root = store.root
    (root / "manifest.json").unlink()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    with pytest.raises(StoreCorrupt, match="manifest") as raised:
        MemoryStore(root)
    assert REPAIR in str(raised.value)
    with pytest.raises(StoreCorrupt, match=REPAIR):
        store.gc()  # an object opened before the manifest was lost
    with pytest.raises(StoreCorrupt, match=REPAIR):
        store.write_segment(memories(np.random.default_rng(1), a), MODEL, DIM)
    line = one_line_error(runner.invoke(app, ["gc", "--store", str(root), "--grace-s", "0"]))
    assert REPAIR in line
    assert REPAIR in one_line_error(
        runner.invoke(
            app,
            [
                "recall",
                "q",
                "--store",
                str(root),
                "--app",
                "app",
                "--user",
                a[0],
                "--embedder",
                "none",
            ],
        )
    )
    assert sorted(p for p in root.rglob("*") if p.is_file()) == files  # nothing deleted
    assert not (root / "manifest.json").exists()


def test_a_backfill_into_a_store_that_lost_its_manifest_is_refused(tmp_path: Path) -> None:
    archive, root = backfilled(tmp_path)
    (root / "manifest.json").unlink()
    segments = sorted((root / "memories").rglob("*.parquet"))
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(root),
            "--embedder",
            "none",
            "--in-process",
        ],
    )
    assert REPAIR in one_line_error(result)
    assert not (root / "manifest.json").exists()  # no new empty store over the old files
    assert sorted((root / "memories").rglob("*.parquet")) == segments


def test_an_empty_or_new_directory_is_still_a_new_store(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for root in (tmp_path / "new", tmp_path / "empty"):
        if root.name == "empty":
            (root / "memories").mkdir(parents=True)  # empty data directories are no data
            (root / "runs").mkdir()
            (root / "runs" / "r1.json").write_text("{}")  # run reports are not store data
        store = MemoryStore(root, shards=2)
        assert store.manifest().version == 0 and store.gc() == []
        assert store.write_segment(memories(rng, ["u1"]), MODEL, DIM).written == 3


def test_a_first_run_killed_after_prepare_is_not_taken_for_a_lost_manifest(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = MemoryStore(root, shards=2)
    store.prepare_segments(memories(np.random.default_rng(0), ["u1"]), MODEL, DIM)
    # The job dies here: prepared files, nothing committed. A rerun must open the store.
    again = MemoryStore(root)
    assert again.manifest().version == 0 and again.load().count() == 0
    assert {p.suffix for p in again.gc()} == {".parquet", ".faiss"}


# -- ledger, manifest and gc ------------------------------------------------------------------
def test_a_deleted_ledger_is_refused_then_repaired_without_duplicates(tmp_path: Path) -> None:
    archive, root = backfilled(tmp_path)
    before = store_ids(MemoryStore(root))
    for path in (root / "ledger").iterdir():
        path.unlink()
    with pytest.raises(StoreCorrupt, match="ledger") as raised:
        backfilled(tmp_path)
    assert REPAIR in str(raised.value)
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(root),
            "--embedder",
            "none",
            "--in-process",
        ],
    )
    assert "ledger" in one_line_error(result)
    doctor = runner.invoke(app, ["doctor", str(root)])
    assert doctor.exit_code == 1 and "ledger" in doctor.output
    repaired = runner.invoke(app, ["doctor", "--repair", str(root)])
    assert repaired.exit_code == 0, repaired.output
    backfilled(tmp_path)  # processes every session again
    store = MemoryStore(root)
    assert store_ids(store) == before  # nothing lost, no duplicates
    assert store.manifest().ledger_sessions == 12  # the ledger is whole again
    assert runner.invoke(app, ["doctor", str(root)]).exit_code == 0


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe\x00\x01binary", b'{"format": "mnemoray.mem', b"[1, 2]", b'{"format": 7}', b""],
)
def test_gc_on_a_corrupt_manifest_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    store, _, _ = vector_store(tmp_path)
    manifest = store.root / "manifest.json"
    manifest.write_bytes(content)
    files = sorted(p for p in store.root.rglob("*") if p.is_file())
    with pytest.raises(StoreCorrupt) as raised:
        MemoryStore(store.root)
    assert str(manifest) in str(raised.value) and REPAIR in str(raised.value)
    line = one_line_error(runner.invoke(app, ["gc", "--store", str(store.root), "--grace-s", "0"]))
    assert str(manifest) in line and REPAIR in line
    assert sorted(p for p in store.root.rglob("*") if p.is_file()) == files


# -- serving a corrupt store ------------------------------------------------------------------
@pytest.mark.parametrize(
    "damage", ["binary", "truncated", "not an object", "another model", "keyword-only with a dim"]
)
def test_a_corrupt_manifest_while_serving_is_a_500_without_the_path(
    tmp_path: Path, damage: str
) -> None:
    service = MemoryService.open(tmp_path / "store", embedder=None)
    key = "recovery-test-key-0123456789"
    client = TestClient(
        build_api(
            ServiceBackend(service),  # type: ignore[arg-type]
            HttpConfig(keys=ApiKeys.from_mapping({key: "app"})),
        ),
        headers={"Authorization": f"Bearer {key}"},
        raise_server_exceptions=False,
    )
    body = {
        "app_name": "app",
        "user_id": "ana",
        "memories": [{"text": "ana grows tulips", "memory_id": "m1"}],
    }
    assert client.post("/v1/memories", json=body).status_code == 201
    manifest = tmp_path / "store" / "manifest.json"
    raw = json.loads(manifest.read_text())
    content = {
        "binary": b"\xff\xfe\x00\x01binary",
        "truncated": manifest.read_bytes()[:40],
        "not an object": b"[1, 2]",
        "another model": json.dumps({**raw, "embedding": {"model": "m", "dim": 3}}),
        "keyword-only with a dim": json.dumps({**raw, "embedding": {"model": "none", "dim": 5}}),
    }[damage]
    manifest.write_bytes(content if isinstance(content, bytes) else content.encode())
    body["memories"][0].update(text="ana moved to Madrid", memory_id="m2")
    r = client.post("/v1/memories", json=body)
    assert r.status_code == 500, r.text
    assert str(tmp_path) not in r.text and "manifest" not in r.text
    assert r.json()["error"]["request_id"]


# -- one damaged shard ------------------------------------------------------------------------
def _damage(store: MemoryStore, users: list[str], how: str) -> tuple[int, str]:
    m = store.manifest()
    shard = shard_of("app", users[0], m.shards)
    name = m.segments[shard][0].name
    ppath = store.root / "memories" / f"shard={shard:04d}" / f"{name}.parquet"
    if how == "truncated parquet":
        ppath.write_bytes(ppath.read_bytes()[: ppath.stat().st_size // 2])
    else:
        (store.root / "index" / f"shard={shard:04d}" / f"{name}.faiss").unlink()
    return shard, name


@pytest.mark.parametrize("how", ["truncated parquet", "missing faiss"])
def test_one_damaged_shard_leaves_the_others_serving(tmp_path: Path, how: str) -> None:
    store, a, b = vector_store(tmp_path)
    q = unit(np.random.default_rng(9))
    expected_b = [h.memory.memory_id for h in store.load().search_user("app", b[0], q, k=3)]
    fresh = MemoryStore(store.root)  # a process that loads after the damage
    shard, name = _damage(fresh, a, how)
    snap = fresh.load()  # loads: one shard is damaged, not the store
    assert [h.memory.memory_id for h in snap.search_user("app", b[0], q, k=3)] == expected_b
    assert len(snap.rows_for_user("app", b[1])) == 3
    for read in (
        lambda: snap.search_user("app", a[0], q, k=3),
        lambda: snap.rows_for_user("app", a[0]),
        lambda: snap.search_app("app", q, k=3),  # spans every shard: no partial answer
        lambda: snap.count(),
    ):
        with pytest.raises(StoreCorrupt, match=f"shard {shard}") as raised:
            read()
        assert name in str(raised.value) and REPAIR in str(raised.value)
    rng = np.random.default_rng(11)
    with pytest.raises(StoreCorrupt, match=f"shard {shard}.*{name}"):  # writes to it: refused
        fresh.write_segment(memories(rng, a[:1], note="new"), MODEL, DIM)
    with pytest.raises(StoreCorrupt, match=f"shard {shard}"):
        fresh.forget(user=("app", a[0]))
    assert fresh.forget(user=("app", b[0])) == 3  # forgetting on a healthy shard works
    assert fresh.write_segment(memories(rng, b[:1], note="new"), MODEL, DIM).written == 3


def test_recall_of_a_healthy_tenant_survives_a_damaged_shard_through_the_service(
    tmp_path: Path,
) -> None:
    a, b = users_on_two_shards()
    service = MemoryService.open(tmp_path / "store", embedder=None, shards=4)
    service.add_memories(
        [Memory("app", u, "s0", "fact", f"{u} grows tulips", created_at=1.0) for u in a + b]
    )
    store = MemoryStore(tmp_path / "store")
    m = store.manifest()
    shard = shard_of("app", a[0], 4)
    name = m.segments[shard][0].name
    (tmp_path / "store" / "memories" / f"shard={shard:04d}" / f"{name}.parquet").write_bytes(
        b"PAR1 truncated"
    )
    served = MemoryService(store, None, service.summarizer)
    assert [r.memory.user_id for r in served.search("app", b[0], "tulips")] == [b[0]]
    with pytest.raises(StoreCorrupt, match=f"shard {shard}"):
        served.search("app", a[0], "tulips")
    assert served.stats()["damaged_shards"] == 1  # an operator sees it (metrics, /v1/stats)


# -- mnemoray doctor --------------------------------------------------------------------------
def test_doctor_on_a_healthy_store_says_so(tmp_path: Path) -> None:
    store, _, _ = vector_store(tmp_path)
    result = runner.invoke(app, ["doctor", str(store.root)])
    assert result.exit_code == 0 and "healthy" in result.output
    assert runner.invoke(app, ["doctor", str(tmp_path / "nope")]).exit_code == 2


def test_doctor_rebuilds_a_lost_index_from_the_parquet_vectors(tmp_path: Path) -> None:
    from mnemoray.memory.store.ops.doctor import repair

    store, a, b = vector_store(tmp_path)
    q = unit(np.random.default_rng(9))
    before = [
        (h.memory.memory_id, round(h.score, 5))
        for h in store.load().search_user("app", a[0], q, k=3)
    ]
    shard, name = _damage(store, a, "missing faiss")
    check = runner.invoke(app, ["doctor", str(store.root)])
    assert check.exit_code == 1 and f"index {name} (shard {shard})" in check.output
    assert REPAIR in check.output
    fixed = runner.invoke(app, ["doctor", "--repair", str(store.root)])
    assert fixed.exit_code == 0 and "rebuilt" in fixed.output, fixed.output
    after = MemoryStore(store.root)
    assert [
        (h.memory.memory_id, round(h.score, 5))
        for h in after.load().search_user("app", a[0], q, k=3)
    ] == before
    version = after.manifest().version
    again = repair(store.root)  # idempotent: nothing left, nothing changed
    assert again.problems == [] and again.repaired == [] and again.version == version


def test_doctor_quarantines_an_unreadable_segment_and_the_rerun_restores_it(tmp_path: Path) -> None:
    archive, root = backfilled(tmp_path)
    store = MemoryStore(root)
    before = store_ids(store)
    m = store.manifest()
    shard = next(s for s, segs in enumerate(m.segments) if segs)
    name = m.segments[shard][0].name
    lost = {
        (r["app_name"], r["user_id"], r["session_id"])
        for r in pq.read_table(
            root / "memories" / f"shard={shard:04d}" / f"{name}.parquet"
        ).to_pylist()
    }
    # Readable in part: the file holds fewer rows than the manifest says.
    path = root / "memories" / f"shard={shard:04d}" / f"{name}.parquet"
    pq.write_table(pq.read_table(path).slice(0, 1), path)
    result = runner.invoke(app, ["doctor", "--repair", "--json", str(root)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["healthy"] and any(name in line for line in report["repaired"])
    named = {tuple(s.split("/")) for s in report["reingest"]}
    assert named and named <= lost
    assert (root / "quarantine" / "damaged").is_dir() and not path.exists()
    repaired = MemoryStore(root)
    assert len(store_ids(repaired)) < len(before)  # the segment's rows are out
    assert repaired.load().count() == len(store_ids(repaired))  # and the rest serves
    backfilled(tmp_path)  # the re-run ingests what was lost, nothing twice
    assert store_ids(MemoryStore(root)) == before


def test_doctor_rebuilds_a_lost_manifest_keeping_forgotten_memories_forgotten(
    tmp_path: Path,
) -> None:
    archive, root = backfilled(tmp_path)
    store = MemoryStore(root)
    gone = store.load().tenants()[0]
    assert store.forget(user=gone) > 0
    before, shards = store_ids(store), store.manifest().shards
    live = sorted(m.memory_id for m in store.load().iter_memories())
    (root / "manifest.json").unlink()
    result = runner.invoke(app, ["doctor", "--repair", str(root)])
    assert result.exit_code == 0 and "rebuilt from disk" in result.output, result.output
    rebuilt = MemoryStore(root)
    assert rebuilt.shards == shards
    assert sorted(m.memory_id for m in rebuilt.load().iter_memories()) == live
    assert rebuilt.load().count(*gone) == 0 and store_ids(rebuilt) == before
    version = rebuilt.manifest().version
    again = runner.invoke(app, ["doctor", "--repair", str(root)])  # idempotent
    assert again.exit_code == 0 and "0 repair(s)" in again.output
    assert MemoryStore(root).manifest().version == version
    backfilled(tmp_path)  # the ledger came back with it: nothing is processed twice
    assert store_ids(MemoryStore(root)) == before


def test_doctor_rebuilding_a_vector_store_needs_the_model_id(tmp_path: Path) -> None:
    store, a, _ = vector_store(tmp_path)
    q = unit(np.random.default_rng(9))
    before = [h.memory.memory_id for h in store.load().search_user("app", a[0], q, k=3)]
    (store.root / "manifest.json").write_bytes(b"\x00\x01 not json")
    refused = runner.invoke(app, ["doctor", "--repair", str(store.root)])
    assert "--embedding-model" in one_line_error(refused)
    assert (store.root / "manifest.json").read_bytes() == b"\x00\x01 not json"  # untouched
    fixed = runner.invoke(
        app, ["doctor", "--repair", "--embedding-model", MODEL, "--shards", "4", str(store.root)]
    )
    assert fixed.exit_code == 0, fixed.output
    after = MemoryStore(store.root)
    assert after.manifest().embedding_model == MODEL and after.manifest().dim == DIM
    assert [h.memory.memory_id for h in after.load().search_user("app", a[0], q, k=3)] == before


def test_doctor_reports_a_lost_tombstone_file_and_leaves_it(tmp_path: Path) -> None:
    store, a, _ = vector_store(tmp_path)
    store.forget(user=("app", a[0]))
    for path in (store.root / "tombstones").iterdir():
        path.unlink()
    result = runner.invoke(app, ["doctor", "--repair", str(store.root)])
    assert result.exit_code == 1 and "restore it from a backup" in result.output
    with pytest.raises(StoreCorrupt, match="tombstone"):
        MemoryStore(store.root).load()
