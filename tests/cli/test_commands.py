"""The CLI as a new user meets it: --version, choices in help, compile of the
shipped example, one-line option errors, recall that tells "no memories at all" from
"no match", the ONNX query path, and forget / export / import / stats."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mnemoray.cli.main import app
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers.extractive import ExtractiveSummarizer

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def kw_store(tmp_path: Path) -> Path:
    """A keyword-only store: two users of one app, two sessions for ana."""
    root = tmp_path / "store"
    MemoryService(MemoryStore(root, 2), None, ExtractiveSummarizer()).add_memories(
        [
            Memory(
                "app",
                "ana",
                "s1",
                "fact",
                "Ana keeps an African Grey parrot named Kiwi",
                created_at=1.0,
            ),
            Memory("app", "ana", "s1", "chunk", "Kiwi screams every morning", created_at=2.0),
            Memory("app", "ana", "s2", "fact", "Ana runs a half marathon in May", created_at=3.0),
            Memory("app", "bob", "s9", "fact", "Bob cooks for four on Sundays", created_at=4.0),
        ]
    )
    return root


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"mnemoray {version('mnemoray')}"


def _help(*command: str) -> str:
    """A command's help, wide enough that no option's choices wrap."""
    return runner.invoke(app, [*command, "--help"], env={"COLUMNS": "300"}).stdout


def test_help_lists_the_choices_of_enumerated_options() -> None:
    recall = _help("recall")
    assert "<hybrid|dense|keyword>" in recall
    assert "session_summary|fact|chunk|compaction_summary|consolidated_summary" in recall
    assert "<extractive|openai|transformers|vllm>" in _help("backfill")
    assert "<extractive|openai|transformers|vllm>" in _help("memory", "consolidate")
    bad = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(ROOT / "examples" / "archive.jsonl"),
            "--store",
            "x",
            "--summarizer",
            "gpt",
        ],
    )
    assert bad.exit_code == 2 and "--summarizer" in bad.output


def test_compile_the_shipped_example_skips_its_bad_row() -> None:
    result = runner.invoke(
        app,
        [
            "compile",
            str(ROOT / "examples" / "archive.jsonl"),
            "--session-id",
            "maya-parrots",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)
    assert request["contents"] and request["total_tokens"] > 0
    warning = _lines(result.stderr)
    assert len(warning) == 1
    assert warning[0].startswith("warning: skipped 1 bad archive row(s): archive.jsonl:6: ")


def test_compile_of_a_session_in_a_bad_row_names_the_row(tmp_path: Path) -> None:
    archive = tmp_path / "a.jsonl"
    archive.write_text(
        json.dumps(
            {
                "app_name": "a",
                "user_id": "u",
                "session_id": "s1",
                "events": [{"role": "bot", "text": "hi"}],
            }
        )
        + "\n"
    )
    result = runner.invoke(app, ["compile", str(archive), "--session-id", "s1"])
    assert result.exit_code == 2
    assert "a.jsonl:1" in result.output and "--session-id" in result.output
    assert "Traceback" not in result.output


def test_summarizer_without_its_options_is_one_line_naming_the_flag(
    tmp_path: Path, kw_store: Path
) -> None:
    archive = ROOT / "examples" / "archive.jsonl"
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(tmp_path / "new"),
            "--in-process",
            "--summarizer",
            "openai",
        ],
    )
    assert result.exit_code == 2, result.output
    lines = _lines(result.output)
    assert len(lines) == 1 and lines[0].startswith("error: --summarizer-option: ")
    assert "base_url" in lines[0] and "model" in lines[0]
    assert not (tmp_path / "new" / "manifest.json").exists()  # failed before any work
    unknown = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(tmp_path / "new"),
            "--in-process",
            "--summarizer-option",
            "max_sentence=3",
        ],
    )
    assert unknown.exit_code == 2 and "'max_sentence'" in unknown.output
    consolidate = runner.invoke(
        app,
        [
            "memory",
            "consolidate",
            "--store",
            str(kw_store),
            "--summarizer",
            "openai",
            "--summarizer-option",
            "model=m",
        ],
    )
    assert consolidate.exit_code == 2
    assert _lines(consolidate.output) == [
        "error: --summarizer-option: summarizer 'openai' needs base_url (give each as KEY=VALUE)"
    ]


def test_recall_tells_no_memories_at_all_from_no_match(kw_store: Path) -> None:
    base = ["recall", "--store", str(kw_store), "--embedder", "none"]
    typo = runner.invoke(app, [*base, "--app", "ap", "--user", "ana", "parrot"])
    assert typo.exit_code == 1
    assert _lines(typo.output) == [
        "no memories at all for app 'ap' in this store (nothing searched)"
    ]
    stranger = runner.invoke(app, [*base, "--app", "app", "--user", "zoe", "--json", "parrot"])
    assert stranger.exit_code == 1
    assert json.loads(stranger.stdout)["memories"] == []
    assert "no memories at all for user 'zoe' in app 'app'" in stranger.stderr
    miss = runner.invoke(app, [*base, "--app", "app", "--user", "ana", "submarine"])
    assert miss.exit_code == 0
    assert miss.stdout.startswith("(no match")
    hit = runner.invoke(app, [*base, "--app", "app", "--user", "ana", "parrot"])
    assert hit.exit_code == 0 and "Kiwi" in hit.stdout


def test_recall_queries_with_the_onnx_runtime_without_torch(tmp_path: Path) -> None:
    """The CLI's query embedder comes from the one resolver for the "query" purpose: the
    packaged model on ONNX Runtime, threads not spin-waiting, torch never imported."""
    root = tmp_path / "store"
    MemoryService.open(root).add_memories(
        [Memory("app", "ana", "s1", "fact", "Ana keeps an African Grey parrot named Kiwi")]
    )
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "import mnemoray.cli.store as m\n"
        "from mnemoray.cli.main import app\n"
        "opened = []\n"
        "real = m.open_for_recall\n"
        "def spy(*a, **k):\n"
        "    opened.append(real(*a, **k))\n"
        "    return opened[-1]\n"
        "m.open_for_recall = spy\n"
        f"r = CliRunner().invoke(app, ['recall', '--store', {str(root)!r}, '--app', 'app',"
        " '--user', 'ana', '--json', 'a bird that talks'])\n"
        "assert r.exit_code == 0, r.output\n"
        "e = opened[0].embedder\n"
        "print(type(e).__name__, e.spin, e.model_id, 'torch' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [
        "OnnxEmbedder",
        "False",
        "sentence-transformers/all-MiniLM-L6-v2",
        "False",
    ]


def test_forget_by_id_session_and_user_with_dry_run(kw_store: Path) -> None:
    who = ["--store", str(kw_store), "--app", "app", "--user", "ana"]
    preview = runner.invoke(app, ["forget", *who, "--session", "s1", "--dry-run", "--json"])
    assert preview.exit_code == 0, preview.output
    listed = json.loads(preview.stdout)
    assert listed["dry_run"] is True and len(listed["memory_ids"]) == 2
    assert MemoryStore(kw_store).load().count("app", "ana") == 3  # nothing forgotten
    gone = runner.invoke(app, ["forget", *who, "--session", "s1", "--reason", "asked"])
    assert gone.exit_code == 0 and gone.stdout.strip() == "forgotten: 2"
    again = runner.invoke(app, ["forget", *who, "--session", "s1"])
    assert again.exit_code == 1 and "no memories of session 's1'" in again.output
    # The top-level command is `mnemoray memory forget`, the same function.
    left = MemoryStore(kw_store).load().rows_for_user("app", "ana")
    one = runner.invoke(app, ["memory", "forget", *who, "--id", left[0].memory_id, "--dry-run"])
    assert one.exit_code == 0 and "would forget 1 memories" in one.stdout
    everyone = runner.invoke(app, ["forget", *who[:4], "--user", "bob", "--all", "--json"])
    assert json.loads(everyone.stdout) == {"forgotten": 1}
    assert MemoryStore(kw_store).load().count("app", "bob") == 0
    both = runner.invoke(app, ["forget", *who, "--all", "--session", "s2"])
    assert both.exit_code == 2 and "exactly one of" in both.output


def test_export_import_and_stats(kw_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "memories.jsonl"
    exported = runner.invoke(app, ["export", "--store", str(kw_store), str(out)])
    assert exported.exit_code == 0 and exported.stdout.strip() == f"exported 4 memories to {out}"
    copy = tmp_path / "copy"
    first = runner.invoke(app, ["import", "--store", str(copy), str(out), "--json"])
    assert json.loads(first.stdout)["written"] == 4
    assert MemoryStore(copy).shards == 2  # the exported store's
    second = runner.invoke(app, ["import", "--store", str(copy), str(out), "--json"])
    assert json.loads(second.stdout) | {"version": 0} == {"written": 0, "skipped": 4, "version": 0}
    runner.invoke(app, ["forget", "--store", str(copy), "--app", "app", "--user", "bob", "--all"])
    stats = runner.invoke(app, ["stats", str(copy), "--json"])
    assert stats.exit_code == 0, stats.output
    s = json.loads(stats.stdout)
    assert s["memories"] == 3 and s["kinds"] == {"chunk": 1, "fact": 2}
    assert s["apps"] == {"app": 3} and s["users"] == 1
    assert s["shards"] == 2 and s["segments"] >= 1 and s["rows_stored"] == 4
    assert s["embedding_model"] == "none" and s["bytes"]["total"] > 0
    assert s["last_run"] is None
    text = runner.invoke(app, ["stats", str(copy)]).stdout
    assert "memories: 3 (chunk 1, fact 2)" in text and "users: 1" in text
    bad = runner.invoke(app, ["import", "--store", str(copy), str(kw_store / "manifest.json")])
    assert bad.exit_code == 2 and _lines(bad.output)[0].startswith("error: ")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe not text\n")
    garbled = runner.invoke(app, ["import", "--store", str(copy), str(binary)])
    assert garbled.exit_code == 2
    assert _lines(garbled.output) == [
        f"error: {binary}: not UTF-8 text, so not a `mnemoray export` file (byte 0)"
    ]


@pytest.mark.parametrize(
    ("args", "setting", "supported"),
    [
        (["ui", "--sessions", "mongodb://db/mem"], "ingestion.sessions_db", "a file path"),
        (["ui", "--artifacts", "s3://bucket/art"], "ingestion.artifacts_dir", "a directory"),
        (
            ["serve", "--set", "ingestion.sessions_db=mongodb://db/mem"],
            "ingestion.sessions_db",
            "a file path (SQLite), :memory: or a postgresql:// URL",
        ),
        (["serve", "--store", "postgresql://db/mem"], "store", "a directory, parquet://DIR"),
    ],
    ids=["ui-sessions", "ui-artifacts", "serve-sessions", "serve-store"],
)
def test_a_server_refuses_a_url_it_cannot_open_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    setting: str,
    supported: str,
) -> None:
    """No server starts over a file named ``mongodb:/db/mem`` in the working directory."""
    monkeypatch.chdir(tmp_path)
    store = [] if "--store" in args else ["--store", str(tmp_path / "store")]
    result = runner.invoke(app, [*args, *store])
    (line,) = _lines(result.output)
    assert result.exit_code == 2, result.output
    assert line.startswith(f"error: {setting}: ") and "is not supported here; give" in line
    assert supported in line
    assert list(tmp_path.iterdir()) == []


def test_a_session_database_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    """A PostgreSQL URL is a session location; a server that is not there says so, with
    the URL's password left out, and no store is made."""
    from tests.support.ui_fixtures import build_ui_store

    store = build_ui_store(tmp_path / "store").store
    url = "postgresql://maya:hunter2@127.0.0.1:1/mem"  # nothing listens on port 1
    result = runner.invoke(app, ["ui", "--store", str(store), "--sessions", url, "--port", "18999"])
    (line,) = _lines(result.output)
    assert result.exit_code != 0 and "hunter2" not in result.output
    assert line.startswith("error: sessions: cannot connect to postgresql://***@127.0.0.1:1/mem: ")
