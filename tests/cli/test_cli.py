"""The `mnemoray` command: help lists the commands, demo and compile run for real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from mnemoray.backfill.archive import write_archive
from mnemoray.cli.main import app
from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.session import Session

runner = CliRunner()


def test_help_lists_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mnemoray.cli", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("demo", "compile"):
        assert command in result.stdout


def test_demo_prints_compiled_context_and_trace(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["demo", "--workdir", str(tmp_path), "--turns", "20", "--compile-only"]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "=== compiled for travel_agent ===" in out
    assert "=== compiled for booking_agent ===" in out
    assert "[Summary of earlier conversation]" in out  # compaction happened
    for processor in (
        "static_instruction",
        "instruction",
        "identity",
        "history",
        "memory_preload",
        "artifacts",
        "token_budget",
    ):
        assert f"\n{processor} " in out
    assert (tmp_path / "sessions.db").exists()
    assert "For context: [booking_agent] said:" in out  # narrative casting for travel_agent
    # Each agent opts into the compiler's tools it needs: the booking agent the artifacts.
    travel, booking = out.split("=== compiled for booking_agent ===")
    assert "--- tools: search_flights\n" in travel and "--- tools: load_artifacts\n" in booking
    assert '"load_memory": "no memory service is configured"' in travel


def _archive(tmp_path: Path) -> Path:
    s = Session("app", "u1", session_id="s1")
    s.events += [
        user_message("I love hiking in the Alps.", session_id="s1", timestamp=1.0),
        model_message("guide", "Great, summer is best.", session_id="s1", timestamp=2.0),
    ]
    return write_archive([s], tmp_path / "a.jsonl")


def test_compile_json_from_archive(tmp_path: Path) -> None:
    agent = tmp_path / "agent.json"
    agent.write_text(
        json.dumps(
            {
                "name": "guide",
                "static_instruction": "Be concise.",
                "instruction": "Hiker: {user:name?}",
            }
        )
    )
    result = runner.invoke(
        app,
        [
            "compile",
            str(_archive(tmp_path)),
            "--session-id",
            "s1",
            "--agent",
            str(agent),
            "--message",
            "When?",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    req = json.loads(result.output)
    assert req["system_instruction"].startswith("Be concise.")
    texts = [p.get("text") for c in req["contents"] for p in c["parts"]]
    assert texts == ["I love hiking in the Alps.", "Great, summer is best.", "When?"]
    assert [t["name"] for t in req["trace"]][1] == "static_instruction"


def test_compile_missing_template_key_is_a_clear_error(tmp_path: Path) -> None:
    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps({"name": "guide", "instruction": "Hi {user:name}"}))
    result = runner.invoke(
        app, ["compile", str(_archive(tmp_path)), "--session-id", "s1", "--agent", str(agent)]
    )
    assert result.exit_code == 2
    assert "user:name" in result.output


def test_compile_unknown_session(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compile", str(_archive(tmp_path)), "--session-id", "nope"])
    assert result.exit_code != 0
    assert "nope" in result.output


def test_e2e_demo_archive_has_sessions_and_one_bad_row(tmp_path: Path) -> None:
    from mnemoray.backfill.archive import iter_archive
    from mnemoray.jobs.demo import write_demo_archive

    rows = list(iter_archive(write_demo_archive(tmp_path)))
    good = [r.session for r in rows if r.ok]
    assert {s.user_id for s in good if s.app_name == "travel_app"} == {"maya", "jonas"}
    assert len(good) == 7
    assert [r.location for r in rows if not r.ok] == ["examples.jsonl:6"]


def test_a_damaged_store_is_one_line_not_a_traceback(tmp_path) -> None:
    from mnemoray.memory.records.record import Memory
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.memory.store.parquet.store import MemoryStore
    from mnemoray.summarizers.extractive import ExtractiveSummarizer

    root = tmp_path / "store"
    MemoryService(MemoryStore(root), None, ExtractiveSummarizer()).add_memories(
        [Memory("app", "ana", "s1", "fact", "Ana likes tulips")]
    )
    for segment in root.rglob("*.parquet"):
        segment.write_bytes(b"not parquet")  # damaged on disk
    result = CliRunner().invoke(
        app,
        [
            "recall",
            "--store",
            str(root),
            "--app",
            "app",
            "--user",
            "ana",
            "--embedder",
            "none",
            "tulips",
        ],
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot read segment")
