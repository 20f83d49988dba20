"""`mnemoray memory ...`: commands that maintain users' memories in a store (edit,
versions, forget and forgotten: ``mnemoray.cli.memory_hygiene``; consolidate: here).

`mnemoray memory consolidate` is ``python -m mnemoray.jobs.consolidate`` (same flags, same
exit status), so a schedule may call either.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from mnemoray.cli.common import SummarizerName, error_line, parse_options
from mnemoray.errors import MnemorayError

memory_app = typer.Typer(
    help="Maintain users' memories: edit, forget, consolidate.",
    no_args_is_help=True,
    add_completion=False,
)


@memory_app.command("consolidate")
def consolidate_cmd(
    store: Path = typer.Option(..., "--store", help="Memory store directory."),
    config: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        help="Settings file (YAML/JSON): hygiene."
        "consolidation (per app under hygiene.apps.<app>) "
        "and models.",
    ),
    apps: list[str] | None = typer.Option(None, "--app", help="Only this app (repeatable)."),
    summarizer: SummarizerName | None = typer.Option(
        None,
        "--summarizer",
        help="Summarizer (default: models.summarizer of --config, else extractive).",
    ),
    summarizer_options: list[str] | None = typer.Option(
        None, "--summarizer-option", metavar="KEY=VALUE", help="Summarizer option (repeatable)."
    ),
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        help="Embedder spec (default: models.embedder of --config, else the store's).",
    ),
    enforce_limits: bool = typer.Option(
        False, "--enforce-limits", help="Then evict every user over the hygiene.limits of --config."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be merged."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    lock_file: Path | None = typer.Option(
        None, "--lock-file", help="Lock file (default STORE/schedule/consolidate.lock)."
    ),
) -> None:
    """Merge users' old memories into summaries (with provenance); expire originals due.

    Per app policy from --config (hygiene.consolidation); idempotent."""
    from mnemoray.jobs.consolidate import main
    from mnemoray.summarizers import check_options

    if summarizer is not None:  # then its options are the flags' alone (jobs.consolidate)
        try:
            check_options(summarizer, parse_options(summarizer_options or []))
        except MnemorayError as exc:
            typer.echo(error_line(exc), err=True)
            raise typer.Exit(2) from exc
    argv = ["--store", str(store)]
    for flag, value in (
        ("--config", config),
        ("--summarizer", summarizer),
        ("--embedder", embedder),
        ("--lock-file", lock_file),
    ):
        if value is not None:
            argv += [flag, str(value)]
    for app in apps or []:
        argv += ["--app", app]
    for option in summarizer_options or []:
        argv += ["--summarizer-option", option]
    argv += ["--enforce-limits"] * enforce_limits + ["--dry-run"] * dry_run
    argv += ["--json"] * as_json
    code = main(argv, out=sys.stderr, prog="mnemoray memory consolidate")
    if code:
        raise typer.Exit(code)
