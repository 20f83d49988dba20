"""`mnemoray backfill` and `mnemoray recall`: CliRunner in process, and one real subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mnemoray.backfill.archive import write_archive
from mnemoray.cli.main import app
from mnemoray.memory.store.parquet.store import MemoryStore
from tests.support.factories import DAY, FLYING, T0, parrot, session

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


SESSIONS = [
    parrot(),
    session(
        "cooking",
        T0 + 3 * DAY,
        ("u", "How long should I roast a whole chicken?"),
        ("m", "About 75 minutes at 220C."),
        ("u", "I cook for four people on Sundays."),
    ),
    session(
        "running",
        T0 + 9 * DAY,
        ("u", "I'm training for a half marathon. How many kilometers per week?"),
        ("m", "Build up to 30-40 km per week."),
    ),
    session(
        "bob-parrot",
        T0,
        ("u", "My African Grey parrot keeps screaming."),
        ("m", "Try more toys and attention."),
        user="bob",
    ),
]


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, ray_cluster) -> Path:
    """One store for the module: backfilled through the CLI, on Ray Data (the default)."""
    root = tmp_path_factory.mktemp("cli")
    write_archive(SESSIONS, root / "archive" / "part-0.jsonl")
    (root / "archive" / "part-1.jsonl").write_text('{"broken": \n{"app_name": "app"}\n')
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(root / "archive"),
            "--store",
            str(root / "store"),
            "--shards",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "sessions read: 6\nskipped: 0\nquarantined: 2\nmemories written: " in result.stdout
    return root / "store"


def test_backfill_rerun_adds_nothing_and_reports_counts(store_dir: Path) -> None:
    archive = store_dir.parent / "archive"
    rows = MemoryStore(store_dir).load().count()
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(store_dir),
            "--in-process",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sessions_read"] == 6 and report["skipped"] == 4
    assert report["quarantined"] == 2 and report["memories_written"] == 0
    assert MemoryStore(store_dir).load().count() == rows
    assert MemoryStore(store_dir).quarantine_count() == 2  # same rows, counted once
    bad = runner.invoke(
        app, ["backfill", "--archive", str(archive), "--store", str(store_dir), "--shards", "3"]
    )
    assert bad.exit_code == 2 and "shards" in bad.output


def test_recall_prints_ranked_memories(store_dir: Path) -> None:
    result = runner.invoke(
        app,
        [
            "recall",
            "--store",
            str(store_dir),
            "--app",
            "app",
            "--user",
            "alice",
            "--top-k",
            "3",
            FLYING,
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["#", "score", "kind", "date", "session", "text"]
    assert len(lines) == 4
    first = lines[1].split()
    assert first[0] == "1" and first[3] == "2023-11-14" and first[4] == "parrot"
    assert "bob" not in result.stdout


def test_recall_json_with_filters_and_modes(store_dir: Path) -> None:
    result = runner.invoke(
        app,
        [
            "recall",
            "--store",
            str(store_dir),
            "--app",
            "app",
            "--user",
            "alice",
            "--json",
            "--kind",
            "fact",
            "--after",
            "2023-11-16T00:00:00Z",
            "parrots and cooking",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["query"] == "parrots and cooking" and out["took_ms"] >= 0
    assert out["memories"] and {m["kind"] for m in out["memories"]} == {"fact"}
    assert {m["provenance"]["session_id"] for m in out["memories"]} <= {"cooking", "running"}
    # The one JSON form of a recalled memory (the HTTP API and agent tools use it too).
    keys = {
        "memory_id",
        "app_name",
        "kind",
        "text",
        "score",
        "date",
        "signals",
        "axes",
        "topics",
        "key_facts",
        "provenance",
    }
    assert set(out["memories"][0]) == keys
    assert "dense" in out["memories"][0]["axes"]  # which axes found it
    kw = runner.invoke(
        app,
        [
            "recall",
            "--store",
            str(store_dir),
            "--app",
            "app",
            "--user",
            "alice",
            "--mode",
            "keyword",
            "--json",
            FLYING,
        ],
    )
    assert kw.exit_code == 0, kw.output
    kw_first = json.loads(kw.stdout)["memories"][:1]
    assert not kw_first or kw_first[0]["provenance"]["session_id"] != "parrot"
    bad_mode = runner.invoke(
        app,
        [
            "recall",
            "--store",
            str(store_dir),
            "--app",
            "app",
            "--user",
            "alice",
            "--mode",
            "fuzzy",
            "x",
        ],
    )
    assert bad_mode.exit_code == 2 and "mode" in bad_mode.output
    missing = runner.invoke(app, ["recall", "--store", str(store_dir), "x"])
    assert missing.exit_code == 2 and "--app" in missing.output
    nostore = runner.invoke(
        app, ["recall", "--store", str(store_dir.parent / "nope"), "--app", "a", "--user", "u", "x"]
    )
    assert nostore.exit_code == 2 and "no memory store" in nostore.output


def test_recall_batch_in_input_order_with_errors(store_dir: Path, tmp_path: Path) -> None:
    lines = [
        {"qid": "q1", "app_name": "app", "user_id": "alice", "query": FLYING, "top_k": 2},
        {
            "qid": "q2",
            "app_name": "app",
            "user_id": "bob",
            "query": "parrot",
            "top_k": 5,
            "filters": {"session_id": "bob-parrot", "kinds": ["chunk"]},
        },
        {
            "qid": "q3",
            "app_name": "app",
            "user_id": "alice",
            "query": "x",
            "filters": {"kinds": ["note"]},
        },
        "not an object",
        {
            "qid": "q5",
            "app_name": "app",
            "user_id": "alice",
            "query": "chicken",
            "filters": {"before": "2023-11-15T00:00:00Z"},
        },
        {"qid": "q6", "app_name": "app", "query": "missing user"},
        {"qid": 7, "app_name": "app", "user_id": "nobody", "query": "anything"},
    ]
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n{bad json\n")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(
        app, ["recall", "--store", str(store_dir), "--queries", str(queries), "--out", str(out)]
    )
    assert result.exit_code == 1, result.output
    assert "4 query line(s) failed" in result.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["qid"] for g in got] == ["q1", "q2", "q3", None, "q5", "q6", 7, None]
    q1 = got[0]
    assert set(q1) == {"qid", "memories", "took_ms"} and len(q1["memories"]) == 2
    assert q1["memories"][0]["provenance"]["session_id"] == "parrot"
    # in_place_of only where a chunk stands in for a better-ranked fact.
    assert set(q1["memories"][0]) - {"in_place_of"} == {
        "memory_id",
        "app_name",
        "kind",
        "text",
        "score",
        "date",
        "signals",
        "axes",
        "topics",
        "key_facts",
        "provenance",
    }
    assert "dense" in q1["memories"][0]["signals"]
    assert got[1]["memories"] and {
        (m["provenance"]["session_id"], m["kind"]) for m in got[1]["memories"]
    } == {("bob-parrot", "chunk")}
    assert "filters.kinds" in got[2]["error"] and got[2]["line"] == 3
    assert "expected a JSON object" in got[3]["error"]
    # Before 2023-11-15 alice only has the parrot talk: no chicken, whatever the score.
    assert {m["provenance"]["session_id"] for m in got[4]["memories"]} <= {"parrot"}
    assert "user_id" in got[5]["error"]
    assert got[6]["memories"] == []
    assert got[7]["line"] == 9 and got[7]["error"].startswith("invalid JSON")


def test_recall_real_subprocess(store_dir: Path, tmp_path: Path) -> None:
    """The installed console script, as other tools call it (keyword mode: no model load)."""
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps(
            {
                "qid": "a",
                "app_name": "app",
                "user_id": "alice",
                "query": "African Grey parrots",
                "top_k": 3,
            }
        )
        + "\n"
    )
    proc = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "mnemoray"),
            "recall",
            "--store",
            str(store_dir),
            "--queries",
            str(queries),
            "--mode",
            "keyword",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip())
    assert answer["qid"] == "a"
    assert answer["memories"][0]["provenance"]["session_id"] == "parrot"
    assert answer["took_ms"] >= 0
    single = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "mnemoray"),
            "recall",
            "--store",
            str(store_dir),
            "--app",
            "app",
            "--user",
            "bob",
            "--mode",
            "keyword",
            "--json",
            "parrot",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert single.returncode == 0, single.stderr
    memories = json.loads(single.stdout)["memories"]
    assert {m["provenance"]["session_id"] for m in memories} == {"bob-parrot"}
