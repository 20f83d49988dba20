"""The CLI on a ``lancedb://`` store: the same commands as on a directory, and one line
(exit 2) naming the feature for what only the Parquet store has."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mnemoray.cli.main import app

runner = CliRunner()
ARCHIVE = Path(__file__).resolve().parents[2] / "examples" / "archive.jsonl"


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_cli_commands_on_a_lancedb_store(tmp_path: Path) -> None:
    store = f"lancedb://{tmp_path / 'ln'}"
    code, out = cli(
        "backfill",
        "--archive",
        str(ARCHIVE),
        "--store",
        store,
        "--in-process",
        "--embedder",
        "none",
        "--json",
    )
    assert code == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["memories_written"] > 0 and report["quarantined"] == 1
    assert (tmp_path / "ln" / "memories.lance").is_dir()
    code, out = cli(
        "recall",
        "parrot",
        "--store",
        store,
        "--app",
        "pets_app",
        "--user",
        "maya",
        "--embedder",
        "none",
        "--json",
    )
    assert code == 0, out
    found = json.loads(out)["memories"]
    assert found and {m["provenance"]["session_id"] for m in found} >= {"maya-parrots"}
    # A plain path opens the LanceDB store already there.
    code, out = cli(
        "forget",
        "--store",
        str(tmp_path / "ln"),
        "--app",
        "pets_app",
        "--user",
        "maya",
        "--session",
        "maya-parrots",
        "--reason",
        "asked",
    )
    assert code == 0 and "forgotten:" in out, out
    code, out = cli(
        "recall",
        "parrot",
        "--store",
        store,
        "--app",
        "pets_app",
        "--user",
        "maya",
        "--embedder",
        "none",
        "--json",
    )
    assert all(m["provenance"]["session_id"] != "maya-parrots" for m in json.loads(out)["memories"])
    exported = tmp_path / "out.jsonl"
    code, out = cli("export", str(exported), "--store", store)
    assert code == 0 and "exported" in out, out
    code, out = cli("import", str(exported), "--store", str(tmp_path / "pq"), "--json")
    assert code == 0 and json.loads(out)["written"] == len(exported.read_text().splitlines()) - 1
    code, out = cli("stats", store, "--json")
    figures = json.loads(out)
    assert code == 0 and figures["backend"] == "lancedb" and figures["users"] == 2, out
    assert figures["memories"] == len(exported.read_text().splitlines()) - 1
    assert figures["apps"] == json.loads(cli("stats", str(tmp_path / "pq"), "--json")[1])["apps"]


def test_parquet_only_commands_say_so_in_one_line(tmp_path: Path) -> None:
    store = f"lancedb://{tmp_path / 'ln'}"
    assert (
        cli(
            "backfill",
            "--archive",
            str(ARCHIVE),
            "--store",
            store,
            "--in-process",
            "--embedder",
            "none",
        )[0]
        == 0
    )
    for args, feature in ((["doctor", store], "doctor"),):
        code, out = cli(*args)
        assert code == 2, (args, out)
        (line,) = out.strip().splitlines()
        assert feature in line and "needs a Parquet store" in line and "Traceback" not in out
    code, out = cli("recall", "x", "--store", "s3://bucket/mem", "--app", "a", "--user", "u")
    assert code == 2 and "is not supported here" in out and "Traceback" not in out
    code, out = cli(
        "recall", "x", "--store", f"lancedb://{tmp_path / 'none'}", "--app", "a", "--user", "u"
    )
    assert code == 2 and "no memory store" in out and "lancedb.json" in out
