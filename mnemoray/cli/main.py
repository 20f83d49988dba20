"""The `mnemoray` command: the typer app and its entry function."""

from __future__ import annotations

import os

import typer

from mnemoray.cli.backfill import backfill_cmd
from mnemoray.cli.common import one_line_errors
from mnemoray.cli.compile import compile_cmd
from mnemoray.cli.demo import demo
from mnemoray.cli.doctor import doctor
from mnemoray.cli.graph import graph_cmd
from mnemoray.cli.mcp import mcp_cmd
from mnemoray.cli.memory_group import memory_app
from mnemoray.cli.memory_hygiene import MEMORY_COMMANDS, forget
from mnemoray.cli.profile import domain_cmd, profile_cmd
from mnemoray.cli.serve import serve_cmd
from mnemoray.cli.store import compact, gc, recall
from mnemoray.cli.transfer import export_cmd, import_cmd, stats
from mnemoray.cli.ui import ui_cmd

# Set by the entry function only: importing the CLI (tests, `jobs`) changes no environment.
ENV_DEFAULTS = {"HF_HUB_OFFLINE": "1"}  # never reach a model hub


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"mnemoray {version('mnemoray')}")
        except PackageNotFoundError:  # a source tree that was never installed
            typer.echo("mnemoray (not installed: no version)")
        raise typer.Exit()


app = typer.Typer(
    help="mnemoray: long-term memory and compiled context for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the installed version and exit.",
    ),
) -> None:
    """mnemoray: long-term memory and compiled context for LLM agents."""


# `forget` is `memory forget` (the same function) at the top level.
for name, command in (
    ("demo", demo),
    ("compile", compile_cmd),
    ("backfill", backfill_cmd),
    ("compact", compact),
    ("gc", gc),
    ("recall", recall),
    ("forget", forget),
    ("export", export_cmd),
    ("import", import_cmd),
    ("stats", stats),
    ("doctor", doctor),
    ("serve", serve_cmd),
    ("mcp", mcp_cmd),
    ("graph", graph_cmd),
    ("profile", profile_cmd),
    ("domain", domain_cmd),
    ("ui", ui_cmd),
):
    app.command(name)(one_line_errors(command))
for name, command in MEMORY_COMMANDS:  # mnemoray memory edit | versions | forget | forgotten
    memory_app.command(name)(one_line_errors(command))
app.add_typer(memory_app, name="memory")  # mnemoray memory consolidate


def run() -> None:
    """The console script's entry point."""
    for key, value in ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    app()


if __name__ == "__main__":
    run()
