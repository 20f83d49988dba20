"""`mnemoray recall` with memory scopes: --agent, and the scopes group of --config."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mnemoray.cli.main import app
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService

runner = CliRunner()
CONFIG = """\
scopes:
  apps:
    shop: {share_with: [support]}
    support: {read_from: [shop]}
"""


def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    service = MemoryService.open(root, embedder=None)
    service.add_memories(
        [
            Memory("shop", "ana", "online", "fact", "Ana bought a parrot cage"),
            Memory(
                "shop",
                "ana",
                "online",
                "fact",
                "Ana's parrot cage was paid by card",
                agent_name="billing",
            ),
            Memory("shop", "bo", "online", "fact", "Bo bought a parrot perch"),
        ]
    )
    service.close()
    return root


def recall(root: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["recall", "--store", str(root), "--embedder", "none", "--json", *args]
    )
    return result.exit_code, result.output


def test_recall_as_an_agent(tmp_path: Path) -> None:
    root = store(tmp_path)
    code, out = recall(root, "--app", "shop", "--user", "ana", "--agent", "billing", "parrot cage")
    assert code == 0, out
    got = {m["text"]: m.get("agent_name") for m in json.loads(out)["memories"]}
    assert got == {
        "Ana bought a parrot cage": None,
        "Ana's parrot cage was paid by card": "billing",
    }
    code, out = recall(root, "--app", "shop", "--user", "ana", "parrot cage")
    assert [m["text"] for m in json.loads(out)["memories"]] == ["Ana bought a parrot cage"]


def test_recall_reads_the_apps_that_share_with_it(tmp_path: Path) -> None:
    root = store(tmp_path)
    config = tmp_path / "mnemoray.yaml"
    config.write_text(CONFIG)
    # support holds nothing of its own for ana: what shop shares is still found.
    code, out = recall(
        root, "--app", "support", "--user", "ana", "--config", str(config), "parrot cage"
    )
    assert code == 0, out
    got = json.loads(out)["memories"]
    assert [(m["app_name"], m["text"]) for m in got] == [("shop", "Ana bought a parrot cage")]
    table = runner.invoke(
        app,
        [
            "recall",
            "--store",
            str(root),
            "--embedder",
            "none",
            "--app",
            "support",
            "--user",
            "ana",
            "--config",
            str(config),
            "parrot cage",
        ],
    ).output.splitlines()
    assert table[0].split() == ["#", "score", "kind", "date", "owner", "session", "text"]
    assert table[1].split()[4] == "shop"  # the owner app of a shared memory
    # Without the config nothing is shared: support has no memories of ana at all.
    code, out = recall(root, "--app", "support", "--user", "ana", "parrot cage")
    assert code == 1 and "no memories at all" in out


def test_bad_agent_and_bad_scopes_are_one_line_usage_errors(tmp_path: Path) -> None:
    root = store(tmp_path)
    code, out = recall(root, "--app", "shop", "--user", "ana", "--agent", "two words", "x")
    assert code == 2 and "--agent" in out and "is not an agent name" in out
    assert "Traceback" not in out
    config = tmp_path / "bad.yaml"
    config.write_text("scopes:\n  apps:\n    shop: {share: [support]}\n")
    code, out = recall(root, "--app", "shop", "--user", "ana", "--config", str(config), "x")
    assert code == 2 and "--config" in out and "scopes.apps.shop.share" in out
