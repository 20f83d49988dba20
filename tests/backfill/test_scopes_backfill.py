"""The backfill stamps memories by the `scopes` settings like online ingestion does: a
session of an app whose memory_scope is `agent` belongs to its agent; a session of
several agents is quarantined naming why (nothing half-written)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mnemoray.backfill.archive import write_archive
from mnemoray.cli.main import app
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.session import Session
from tests.support.factories import FLYING, T0, parrot

runner = CliRunner()


def _archive(root: Path) -> Path:
    two = Session(
        "vet",
        "alice",
        "two-agents",
        events=[
            user_message("My parrot plucks its feathers", timestamp=T0, id="e0"),
            model_message("triage", "That can be stress or illness", timestamp=T0 + 1, id="e1"),
            model_message("doctor", "Book a check-up this week", timestamp=T0 + 2, id="e2"),
        ],
    )
    write_archive([parrot(app="vet"), parrot(app="pets"), two], root / "a.jsonl")
    return root / "a.jsonl"


def test_the_backfill_follows_the_scopes_group(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"scopes": {"apps": {"vet": {"memory_scope": "agent"}}}}))
    store = tmp_path / "store"
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(_archive(tmp_path)),
            "--store",
            str(store),
            "--in-process",
            "--config",
            str(settings),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["quarantined"] == 1
    service = MemoryService.open(store)
    try:
        (bad,) = service.store.read_quarantine()
        assert "agent_name" in bad["reason"] and "'doctor', 'triage'" in bad["reason"]
        vet = service.list_memories("vet", "alice")[0]
        assert vet and {m.agent_name for m in vet} == {"assistant"}  # the parrot session's
        assert {m.session_id for m in vet} == {"parrot"}  # nothing of the refused session
        assert {m.agent_name for m in service.list_memories("pets", "alice")[0]} == {""}
        assert service.search("vet", "alice", FLYING, 3) == []  # no agent: shared only
        mine = service.search("vet", "alice", FLYING, 3, RecallFilters(agent_name="assistant"))
        assert mine and "parrot" in mine[0].memory.text.lower()
    finally:
        service.close()


def test_a_bad_scopes_group_is_one_line_naming_it(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"scopes": {"memory_scope": "team"}}))
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(_archive(tmp_path)),
            "--store",
            str(tmp_path / "store"),
            "--in-process",
            "--config",
            str(settings),
        ],
    )
    assert result.exit_code == 2 and "scopes.memory_scope" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "store").exists()
