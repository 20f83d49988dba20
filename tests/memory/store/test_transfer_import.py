"""`mnemoray import` of a hostile export: the whole file is checked against the limits of an
online write before anything is stored, so a bad line anywhere ends as one error line
(exit 2) naming it, and the store stays exactly as it was (both stores alike)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from mnemoray.cli.main import app
from mnemoray.memory.store.ops.doctor import diagnose
from mnemoray.memory.store.ops.transfer import EXPORT_FORMAT
from mnemoray.memory.store.protocol import open_backend
from tests.support.store_contract import BACKENDS, DIM, MODEL, location, make, new_rng

runner = CliRunner()


def header(**kw: Any) -> dict[str, Any]:
    return {
        "type": "header",
        "format": EXPORT_FORMAT,
        "embedding_model": MODEL,
        "dim": DIM,
        "summarizer": None,
        "shards": 2,
        "count": 3,
        **kw,
    }


def memory_rows(n: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    return [
        {"type": "memory", **m.to_dict(with_embedding=True)}
        for m in make(rng, user="imported", n=n)
    ]


def write(path: Path, *lines: Any) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


def files_of(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """A store already holding memories (its location and directory)."""
    root = tmp_path / "target"
    store = open_backend(location(request.param, root))
    store.write_segment(make(new_rng(), n=4), MODEL, DIM)
    return location(request.param, root), root


def bad_graph_row(rows: list[dict[str, Any]]) -> list[Any]:
    return [header(), *rows, {"type": "graph", "table": "entities", "row": {"app_name": "app"}}]


def long_text(rows: list[dict[str, Any]]) -> list[Any]:
    rows[1]["text"] = "x" * 5_000_000
    return [header(), *rows]


def many_topics(rows: list[dict[str, Any]]) -> list[Any]:
    rows[2]["topics"] = [f"t{i}" for i in range(200_000)]
    return [header(), *rows]


def nul_in_id(rows: list[dict[str, Any]]) -> list[Any]:
    rows[1]["user_id"] = "bob\x00admin"
    return [header(), *rows]


def separator_in_id(rows: list[dict[str, Any]]) -> list[Any]:
    rows[1]["app_name"] = "app\x1fother"
    return [header(), *rows]


def separator_in_memory_id(rows: list[dict[str, Any]]) -> list[Any]:
    rows[1]["memory_id"] = "m\x1f1"
    return [header(), *rows]


def bad_agent(rows: list[dict[str, Any]]) -> list[Any]:
    rows[1]["agent_name"] = "agent\x00"
    return [header(), *rows]


def nested(rows: list[dict[str, Any]]) -> list[Any]:
    return [header(), *rows, '{"type": "memory", "text": ' + "[" * 200_000 + "]" * 200_000 + "}"]


def nested_topic(rows: list[dict[str, Any]]) -> list[Any]:
    rows[1]["topics"] = [[[["deep"]]]]
    return [header(), *rows]


def dim_mismatch(rows: list[dict[str, Any]]) -> list[Any]:
    return [header(dim=DIM + 1), *rows]


def other_model(rows: list[dict[str, Any]]) -> list[Any]:
    return [header(embedding_model="another-model"), *rows]


def graph_row_with_separator(rows: list[dict[str, Any]]) -> list[Any]:
    return [
        header(),
        *rows,
        {
            "type": "graph",
            "table": "aliases",
            "row": {
                "entity_id": "e\x1f1",
                "app_name": "app",
                "user_id": "imported",
                "alias": "polly",
                "key": "polly",
                "rule": "exact",
                "confidence": 1.0,
                "session_ids": ["s0"],
                "recorded_at": 1000.0,
            },
        },
    ]


def one_id_two_contents(rows: list[dict[str, Any]]) -> list[Any]:
    # Batches are committed together: one id must not hold two memories across them.
    twin = {**rows[0], "text": rows[0]["text"] + " (edited)"}
    twin["key_text"] = twin["text"]
    twin["content_hash"] = rows[0]["content_hash"][::-1]
    return [header(), rows[0], twin, rows[1]]


HOSTILE: dict[str, tuple[Callable[[list[dict[str, Any]]], list[Any]], int, str]] = {
    "bad graph row after valid memories": (bad_graph_row, 5, "entities column"),
    "5 MB memory text": (long_text, 3, "memory text is 5,000,000 characters (limit 32,000)"),
    "200k topics": (many_topics, 4, "topics: 200,000 items (limit 64)"),
    "NUL in an id": (nul_in_id, 3, "user_id:"),
    "separator in an id": (separator_in_id, 3, "app_name:"),
    "separator in a memory id": (separator_in_memory_id, 3, "memory_id:"),
    "NUL in an agent name": (bad_agent, 3, "agent_name:"),
    "deeply nested JSON": (nested, 5, "nested too deeply"),
    "a nested topic": (nested_topic, 3, "topics[0]: expected a string"),
    "dim mismatch": (dim_mismatch, 2, "header says dim 17"),
    "another model than the store's": (other_model, 0, "another-model"),
    "separator in a graph row": (graph_row_with_separator, 5, "entity_id"),
    "one memory id, two contents": (one_id_two_contents, 3, "holds two different contents"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_export_is_refused_in_one_line_and_writes_nothing(
    case: str, target: tuple[str, Path], tmp_path: Path
) -> None:
    store, root = target
    build, lineno, words = HOSTILE[case]
    source = write(tmp_path / "hostile.jsonl", *build(memory_rows()))
    before = open_backend(store).manifest().version
    files = files_of(root)
    result = runner.invoke(app, ["import", str(source), "--store", store])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert words in lines[0], lines[0]
    if lineno:
        assert f"hostile.jsonl:{lineno}:" in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert open_backend(store).manifest().version == before
    assert files_of(root) == files
    if not store.startswith("lancedb://"):
        assert diagnose(root).healthy


def test_a_hostile_export_into_a_new_store_creates_nothing(tmp_path: Path) -> None:
    source = write(tmp_path / "hostile.jsonl", *bad_graph_row(memory_rows()))
    result = runner.invoke(app, ["import", str(source), "--store", str(tmp_path / "new")])
    assert result.exit_code == 2 and "hostile.jsonl:5:" in result.output, result.output
    assert not (tmp_path / "new" / "manifest.json").exists()


def test_a_valid_export_is_one_commit(target: tuple[str, Path], tmp_path: Path) -> None:
    store, _ = target
    source = write(tmp_path / "ok.jsonl", header(), *memory_rows(5))
    before = open_backend(store).manifest().version
    result = open_backend(store).import_jsonl(source, batch_size=2)  # three batches
    assert result.written == 5 and result.version == before + 1
    again = open_backend(store).import_jsonl(source, batch_size=2)
    assert again.written == 0 and again.version == before + 1  # idempotent
    got = open_backend(store).load()
    for row in memory_rows(5):
        mem = got.get(row["memory_id"])
        assert mem is not None and mem.text == row["text"]
