"""docs/cli.md is what scripts/cli_docs.py renders from the command tree now."""

from __future__ import annotations

from pathlib import Path

from scripts import cli_docs


def test_cli_md_matches_the_commands() -> None:
    assert cli_docs.CLI_MD.read_text() == cli_docs.render(), (
        "docs/cli.md is stale: run `python scripts/cli_docs.py --write`"
    )


def test_every_command_has_a_section() -> None:
    text = cli_docs.CLI_MD.read_text()
    paths = [path for path, _, _ in cli_docs.walk(cli_docs.root_command(), ("mnemoray",))]
    assert ("mnemoray", "memory", "consolidate") in paths and ("mnemoray", "recall") in paths
    for path in paths:
        assert f"`{' '.join(path)}`\n\n```text\nUsage: {' '.join(path)} " in text


def test_check_fails_on_a_stale_page_and_write_fixes_it(tmp_path: Path, capsys) -> None:
    page = tmp_path / "cli.md"
    page.write_text("# stale\n")
    assert cli_docs.main(["--check", "--out", str(page)]) == 1
    assert "-# stale" in capsys.readouterr().out
    assert cli_docs.main(["--write", "--out", str(page)]) == 0
    assert cli_docs.main(["--check", "--out", str(page)]) == 0


def test_the_page_does_not_depend_on_the_terminal(monkeypatch) -> None:
    first = cli_docs.render()
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    assert cli_docs.render() == first
    assert "\x1b[" not in first and "╭" not in first
