"""The `mnemoray` command: the typer app and its entry function."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import typer

from cli.backfill import backfill_cmd
from cli.compile import compile_cmd
from cli.demo import demo
from cli.doctor import doctor
from cli.memory import compact, gc, recall
from cli.memory_group import memory_app
from cli.memory_hygiene import MEMORY_COMMANDS
from cli.serve import serve_cmd
from mnemoray.errors import MnemorayError

# Set by the entry function only: importing the CLI (tests, `jobs`) changes no environment.
ENV_DEFAULTS = {"HF_HUB_OFFLINE": "1"}  # never reach a model hub



def one_line_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Any mnemoray error a command lets through ends as one line and exit code 2, never a
    traceback (the CLI's user is the operator: non-public messages are shown too)."""
    @functools.wraps(command)
    def run_command(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MnemorayError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
    return run_command


app = typer.Typer(help="mnemoray: long-term memory and compiled context for LLM agents.",
                  no_args_is_help=True, add_completion=False)
for name, command in (("demo", demo), ("compile", compile_cmd), ("backfill", backfill_cmd),
                      ("compact", compact), ("gc", gc), ("recall", recall),
                      ("doctor", doctor), ("serve", serve_cmd)):
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
