"""`mnemoray compile`: the working context of one archived session for an agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mnemoray.cli.common import print_request

if TYPE_CHECKING:
    from mnemoray.sessions.session import Session


def compile_cmd(
    archive: Path = typer.Argument(
        ..., exists=True, help="Parquet/JSONL/ADK-JSON archive (file or directory)."
    ),
    session_id: str = typer.Option(..., "--session-id", help="The session to compile."),
    agent_file: Path | None = typer.Option(
        None,
        "--agent",
        exists=True,
        help="AgentSpec as JSON (name, static_instruction, instruction, ...).",
    ),
    name: str = typer.Option("agent", help="Agent name (without --agent)."),
    message: str | None = typer.Option(None, help="The new user message."),
    budget: int | None = typer.Option(None, help="Token budget (without --agent)."),
    as_json: bool = typer.Option(False, "--json", help="Print the CompiledRequest as JSON."),
) -> None:
    """Compile the working context of one archived session for an agent."""
    from mnemoray.compiler import AgentSpec, Compiler, TemplateError

    session = find_session(archive, session_id)
    try:
        spec = (
            AgentSpec(**json.loads(agent_file.read_text()))
            if agent_file
            else AgentSpec(name=name, token_budget=budget)
        )
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--agent") from exc
    try:
        request = Compiler.default().compile(session, spec, message)
    except TemplateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(request.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_request(request)


def find_session(archive: Path, session_id: str) -> Session:
    """The session ``session_id`` of the archive. Bad rows of other sessions are skipped
    with one warning line (as `mnemoray backfill` quarantines them); the session's own
    row being bad, or missing, is a usage error naming the row."""
    from mnemoray.backfill.archive import iter_archive

    found: Session | None = None
    bad: list[str] = []
    for row in iter_archive(archive):
        if row.session is not None:
            if row.session.session_id == session_id and found is None:
                found = row.session
            continue
        raw_id = row.raw.get("session_id") if isinstance(row.raw, dict) else None
        if raw_id == session_id:
            raise typer.BadParameter(
                f"session {session_id!r} is in a bad row: {row.location}: {row.error}",
                param_hint="--session-id",
            )
        bad.append(f"{row.location}: {row.error}")
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        typer.echo(f"warning: skipped {len(bad)} bad archive row(s): {bad[0]}{more}", err=True)
    if found is None:
        raise typer.BadParameter(
            f"no session {session_id!r} in {archive}", param_hint="--session-id"
        )
    return found
