"""What is the LanceDB backend's own: locations and the resolver, tables on disk, real
deletes, pinned views, a commit cut short, the where-clause app search, and the
backfill (both engines) writing through the protocol into ``lancedb://``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import lancedb
import numpy as np
import pytest

from mnemoray.backfill import BackfillConfig, RayOptions, backfill
from mnemoray.errors import ConfigError, Unsupported
from mnemoray.faults import CRASH_ENV, CRASH_EXIT_CODE
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.lance import LanceStore
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.protocol import open_backend, parse_location, require_parquet
from tests.support.archive_gen import make_archive
from tests.support.factories import FLYING, parrot
from tests.support.store_contract import DIM, MODEL, make, new_rng, unit


@pytest.fixture
def rng() -> np.random.Generator:
    return new_rng()


def lance(path: Path) -> LanceStore:
    store = open_backend(f"lancedb://{path}")
    assert isinstance(store, LanceStore)
    return store


# -- choosing a backend ----------------------------------------------------------------
def test_the_location_picks_the_backend(tmp_path: Path, rng) -> None:
    assert isinstance(open_backend(tmp_path / "new"), MemoryStore)  # a new store: Parquet
    assert isinstance(open_backend(f"parquet://{tmp_path / 'pq'}"), MemoryStore)
    store = lance(tmp_path / "ln")
    assert store.uri == f"lancedb://{tmp_path / 'ln'}"
    store.write_segment(make(rng, n=2), MODEL, DIM)
    assert isinstance(open_backend(str(tmp_path / "ln")), LanceStore)  # a plain path: as found
    MemoryStore(tmp_path / "pq").write_segment(make(rng, n=1), MODEL, DIM)
    assert parse_location(str(tmp_path / "pq")) == ("parquet", tmp_path / "pq")
    for bad, words in (
        (f"parquet://{tmp_path / 'ln'}", "holds a lancedb store"),
        (f"lancedb://{tmp_path / 'pq'}", "holds a parquet store"),
        ("s3://bucket/x", "s3://bucket/x is not supported here; give a directory"),
        ("lancedb://", "names no directory"),
        ("", "expected a path"),
    ):
        with pytest.raises(ConfigError, match=words) as raised:
            open_backend(bad)
        assert raised.value.field == "store"
    with pytest.raises(Unsupported, match="not sharded") as raised:
        open_backend(f"lancedb://{tmp_path / 'x'}", shards=4)
    assert raised.value.field == "shards"
    with pytest.raises(Unsupported, match="index_mode sharded"):
        open_backend(f"lancedb://{tmp_path / 'x'}", load_shards=[0])


def test_parquet_only_features_say_so(tmp_path: Path) -> None:
    store = lance(tmp_path / "ln")
    with pytest.raises(Unsupported, match="compaction needs a Parquet store.*lancedb") as raised:
        require_parquet(store, "compaction")
    assert raised.value.field == "store" and raised.value.status == 422
    pq_store = MemoryStore(tmp_path / "pq")
    assert require_parquet(pq_store, "compaction") is pq_store


def test_the_store_says_it_keeps_no_graph_and_refuses_one(tmp_path: Path, rng) -> None:
    """Callers ask ``has_graph`` (not the backend name); graph evidence brought anyway is
    refused, never dropped unseen, and nothing else of the write happens."""
    store = lance(tmp_path / "ln")
    assert store.has_graph is False and MemoryStore(tmp_path / "pq").has_graph is True
    assert store.prepare_graph(()) == ()
    graph = [("h1", object())]
    with pytest.raises(Unsupported, match="entity graph needs a Parquet store") as raised:
        store.prepare_graph(graph)  # type: ignore[arg-type]
    assert raised.value.field == "store"
    with pytest.raises(Unsupported, match="entity graph"):
        store.commit(None, session_hashes=["h1"], graph=graph)  # type: ignore[arg-type]
    with pytest.raises(Unsupported, match="entity graph"):
        store.write_segment(make(rng, n=2), MODEL, DIM, graph=graph)  # type: ignore[arg-type]
    assert store.ledger_contains(["h1"]) == set() and store.load().count() == 0


# -- on disk -------------------------------------------------------------------------------
def test_tables_side_by_side_and_forget_deletes_rows(tmp_path: Path, rng) -> None:
    store = lance(tmp_path / "ln")
    a, b = make(rng, user="a", n=3), make(rng, user="b", n=2, start=5)
    store.write_segment(a + b, MODEL, DIM, session_hashes=["h1"])
    db = lancedb.connect(str(tmp_path / "ln"))
    memories = db.open_table("memories")
    assert memories.count_rows() == 5
    assert memories.schema.field("embedding").type.list_size == DIM  # fixed-size vectors
    assert db.open_table("ledger").count_rows() == 1
    head = json.loads((tmp_path / "ln" / "lancedb.json").read_text())
    assert (head["version"], head["embedding_model"], head["dim"], head["rows"]) == (
        1,
        MODEL,
        DIM,
        5,
    )
    assert store.forget(user=("app", "a"), reason="gdpr", actor="ops") == 3
    assert db.open_table("memories").count_rows() == 2  # deleted, not hidden
    (record,) = db.open_table("forgets").search().limit(None).to_arrow().to_pylist()
    assert (record["scope"], record["user_id"], record["reason"], record["actor"]) == (
        "user",
        "a",
        "gdpr",
        "ops",
    )
    assert store.manifest().rows == 2


def test_compact_then_gc_erase_forgotten_words_from_disk(tmp_path: Path, rng) -> None:
    from typer.testing import CliRunner

    from mnemoray.cli.main import app

    store = lance(tmp_path / "ln")
    secret = make(rng, user="a", n=1)[0]
    store.write_segment([secret, *make(rng, user="b", n=2, start=5)], MODEL, DIM)
    first = lancedb.connect(str(tmp_path / "ln")).open_table("memories").version
    store.forget(user=("app", "a"), reason="gdpr")

    def on_disk(version: int) -> list[str]:
        table = lancedb.connect(str(tmp_path / "ln")).open_table("memories")
        table.checkout(version)
        return table.to_arrow().column("text").to_pylist()

    assert secret.text in on_disk(first)  # a forget hides; older versions still hold it
    runner = CliRunner()
    out = runner.invoke(app, ["compact", "--store", f"lancedb://{tmp_path / 'ln'}"])
    assert out.exit_code == 0 and "memories (version" in out.output, out.output
    out = runner.invoke(app, ["gc", "--store", f"lancedb://{tmp_path / 'ln'}", "--grace-s", "0"])
    assert out.exit_code == 0 and "old table version(s)" in out.output, out.output
    with pytest.raises(ValueError):  # the version that held the words is gone
        on_disk(first)
    versions = lancedb.connect(str(tmp_path / "ln")).open_table("memories").list_versions()
    assert all(secret.text not in on_disk(v["version"]) for v in versions)
    latest = {m.memory_id for m in store.load().iter_memories("app", "b")}
    assert len(latest) == 2  # the others are served as before


def test_a_view_is_pinned_and_the_stamp_moves(tmp_path: Path, rng) -> None:
    store = lance(tmp_path / "ln")
    store.write_segment(make(rng, user="a", n=2), MODEL, DIM)
    before, stamp = store.load(), store.stamp()
    assert store.load() is before  # nothing changed: the same view
    store.write_segment(make(rng, user="a", n=1, start=9), MODEL, DIM)
    assert store.stamp() != stamp
    assert before.count("app", "a") == 2 and len(before.rows_for_user("app", "a")) == 2
    assert store.load().count("app", "a") == 3
    stamp = store.stamp()
    store.forget(user=("app", "a"))
    assert store.stamp() != stamp and store.load().count() == 0 and before.count() == 2


def test_a_commit_cut_short_after_its_memories_is_redone_without_duplicates(
    tmp_path: Path, rng
) -> None:
    """Killed between the memories' add and the ledger: the batch is whole (never half of
    it), the session unledgered; writing it again adds no row and ledgers it."""
    mems = make(rng, user="a", n=4)
    path = tmp_path / "batch.json"
    path.write_text(json.dumps([m.to_dict(with_embedding=True) for m in mems]))
    script = textwrap.dedent(f"""
        import json
        from mnemoray.memory.store.protocol import open_backend
        from mnemoray.memory.records.record import Memory
        mems = [Memory.from_dict(d) for d in json.load(open({str(path)!r}))]
        open_backend({f"lancedb://{tmp_path / 'ln'}"!r}).write_segment(
            mems, {MODEL!r}, {DIM}, session_hashes=["h1"])
    """)
    env = {**os.environ, CRASH_ENV: "lance-memories:1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == CRASH_EXIT_CODE, done.stderr
    store = lance(tmp_path / "ln")
    assert store.load().count("app", "a") == 4  # all of the batch
    assert store.ledger_contains(["h1"]) == set()
    again = store.write_segment(mems, MODEL, DIM, session_hashes=["h1"])
    assert (again.written, again.skipped, again.ledger_added) == (0, 4, 1)
    assert store.load().count() == 4 and store.ledger_contains(["h1"]) == {"h1"}


def test_app_search_where_clause_matches_the_exact_masked_search(tmp_path: Path, rng) -> None:
    store = lance(tmp_path / "ln")
    mems = []
    for u in range(5):
        for s in range(3):
            mems += make(
                rng,
                user=f"u{u}",
                session=f"s{s}",
                n=4,
                start=100 * u + 10 * s,
                kind="fact" if s else "chunk",
                event_time_start=50.0 * s,
                event_time_end=50.0 * s + 20,
            )
    store.write_segment(mems + make(rng, app="other", n=5), MODEL, DIM)
    view = store.load()
    q = unit(rng)
    for flt in (
        RecallFilters(),
        RecallFilters(session_id="s1"),
        RecallFilters(kinds=("chunk",)),
        RecallFilters(after=60.0),
        RecallFilters(before=30.0, kinds=("fact", "chunk")),
    ):
        lance_hits = view.search_app("app", q, k=7, filters=flt)
        exact = view.search_app("app", q, k=7, mask_fn=flt.mask_table)
        assert [h.memory.memory_id for h in lance_hits] == [h.memory.memory_id for h in exact]
        assert np.allclose([h.score for h in lance_hits], [h.score for h in exact])
        assert lance_hits and {h.memory.app_name for h in lance_hits} == {"app"}


# -- the backfill writes through the protocol ------------------------------------------
def test_in_process_backfill_into_lancedb_then_recall(tmp_path: Path) -> None:
    make_archive(tmp_path / "archive", 12, files=2, bad=True, parquet=True)
    from mnemoray.backfill.archive import write_archive

    write_archive([parrot()], tmp_path / "archive" / "part-parrot.jsonl")
    results = {}
    for kind in ("parquet", "lancedb"):
        uri = f"{kind}://{tmp_path / kind}"
        report = backfill(BackfillConfig(tmp_path / "archive", uri, commit_every=4))
        again = backfill(BackfillConfig(tmp_path / "archive", uri))
        assert again.memories_written == 0 and again.skipped == report.sessions_committed
        store = open_backend(uri)
        svc = MemoryService.open(uri)
        hits = svc.search("app", "alice", FLYING, top_k=3)
        assert hits and hits[0].memory.session_id == "parrot"
        results[kind] = (
            report.memories_written,
            report.quarantined,
            store.load().count(),
            [(h.memory.memory_id, round(h.score, 5)) for h in hits],
            len(store.load().tenants()),
        )
        assert (tmp_path / kind / "runs").is_dir()  # the run record beside the tables
        svc.close()
    assert results["parquet"] == results["lancedb"]


@pytest.mark.ray
def test_ray_backfill_into_lancedb(tmp_path: Path, ray_cluster: None) -> None:
    from mnemoray.pipeline.backfill import RayDataEngine

    bad = make_archive(tmp_path / "archive", 10, files=2, bad=True, parquet=False)
    uri = f"lancedb://{tmp_path / 'ln'}"
    cfg = BackfillConfig(
        archive=str(tmp_path / "archive"),
        store=uri,
        commit_every=3,
        embedder=None,
        progress_interval_s=0.0,
        ray=RayOptions(batch_size=3),
    )
    run = backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False)
    reference = backfill(
        BackfillConfig(tmp_path / "archive", tmp_path / "inproc", commit_every=3, embedder=None)
    )
    assert (run.sessions_read, run.quarantined, run.memories_written) == (
        reference.sessions_read,
        bad,
        reference.memories_written,
    )
    assert run.commits >= 2
    store = open_backend(uri)
    assert isinstance(store, LanceStore)
    ours = {m.content_hash for m in store.load().iter_memories()}
    assert ours == {m.content_hash for m in MemoryStore(tmp_path / "inproc").load().iter_memories()}
    again = backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False)
    assert again.memories_written == 0 and store.load().count() == len(ours)
