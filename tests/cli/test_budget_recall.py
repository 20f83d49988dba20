"""``mnemoray recall --budget-tokens``: the best memories that fit, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mnemoray.cli.main import app
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.tokens import count_tokens


def test_recall_within_a_token_budget(tmp_path: Path) -> None:
    store = tmp_path / "store"
    service = MemoryService.open(store, embedder=None)
    service.add_memories(
        [
            Memory(
                "app", "ana", f"s{i}", "fact", f"ana grows tulips number {i}", created_at=i + 1.0
            )
            for i in range(6)
        ]
    )
    service.close()
    recall = ["recall", "--store", str(store), "--app", "app", "--user", "ana"]
    run = CliRunner().invoke(
        app,
        [
            *recall,
            "--top-k",
            "6",
            "--embedder",
            "none",
            "--json",
            "--budget-tokens",
            "12",
            "tulips",
        ],
    )
    assert run.exit_code == 0, run.output

    got = json.loads(run.output)["memories"]
    assert len(got) == 2 and sum(count_tokens(m["text"]) for m in got) <= 12
    bad = CliRunner().invoke(app, [*recall, "--budget-tokens", "0", "tulips"])
    assert bad.exit_code == 2 and "budget-tokens" in bad.output
