"""`mnemoray compile`: the working context of one archived session for an agent."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.common import print_request


def compile_cmd(
    archive: Path = typer.Argument(..., exists=True, help="Parquet/JSONL/ADK-JSON archive "
                                   "(file or directory)."),
    session_id: str = typer.Option(..., "--session-id", help="The session to compile."),
    agent_file: Path | None = typer.Option(None, "--agent", exists=True,
                                              help="AgentSpec as JSON (name, "
                                              "static_instruction, instruction, ...)."),
    name: str = typer.Option("agent", help="Agent name (without --agent)."),
    message: str | None = typer.Option(None, help="The new user message."),
    budget: int | None = typer.Option(None, help="Token budget (without --agent)."),
    as_json: bool = typer.Option(False, "--json", help="Print the CompiledRequest as JSON."),
) -> None:
    """Compile the working context of one archived session for an agent."""
    from mnemoray.archive import read_archive
    from mnemoray.compiler import AgentSpec, Compiler, TemplateError

    sessions = [s for s in read_archive(archive) if s.session_id == session_id]
    if not sessions:
        raise typer.BadParameter(f"no session {session_id!r} in {archive}",
                                 param_hint="--session-id")
    try:
        spec = (AgentSpec(**json.loads(agent_file.read_text())) if agent_file
                else AgentSpec(name=name, token_budget=budget))
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--agent") from exc
    try:
        request = Compiler.default().compile(sessions[0], spec, message)
    except TemplateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(request.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_request(request)

