"""The `mnemoray` command line."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer

from mnemoray.compiler.request import CompiledRequest, Content

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub

app = typer.Typer(help="mnemoray: long-term memory and compiled context for LLM agents.",
                  no_args_is_help=True, add_completion=False)


@app.command()
def demo(
    workdir: Path | None = typer.Option(None, help="Where to keep the demo stores "
                                           "(default: a fresh temporary directory)."),
    turns: int = typer.Option(52, min=4, help="User turns in the generated session."),
) -> None:
    """Build a long demo session, compact it, and print its compiled context and trace."""
    from mnemoray.artifacts import FileArtifactStore
    from mnemoray.demo import (
        BOOKING_AGENT,
        TRAVEL_AGENT,
        build_demo_session,
        compile_turn,
        demo_compactor,
        naive_tokens,
    )
    from mnemoray.sqlite_store import SQLiteSessionStore

    root = workdir or Path(tempfile.mkdtemp(prefix="mnemoray-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    store = SQLiteSessionStore(root / "sessions.db")
    artifacts = FileArtifactStore(root / "artifacts")
    built = build_demo_session(store, artifacts, turns=turns, compactor=demo_compactor())
    session = store.get_session(*built.session.key)
    raw_events = sum(e.type != "compaction" for e in session.events)
    message = "Which of my flights so far was the cheapest, and does it suit my knee?"
    typer.echo(f"store: {root}\nsession {session.session_id}: {raw_events} raw events, "
               f"{turns} invocations, {built.compactions} compaction events (raw events kept)\n")
    for agent in (TRAVEL_AGENT, BOOKING_AGENT):
        typer.echo(f"=== compiled for {agent.name} ===")
        _print_request(compile_turn(session, agent, artifacts, message),
                       naive=naive_tokens(session, message))


@app.command("compile")
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
        _print_request(request)


def _print_request(req: CompiledRequest, naive: int | None = None) -> None:
    typer.echo("--- system_instruction ---")
    typer.echo(req.system_instruction)
    typer.echo(f"--- contents ({len(req.contents)}) ---")
    for content in req.contents:
        typer.echo(f"[{content.role}] {_preview(content)}")
    typer.echo(f"--- tools: {', '.join(t['name'] for t in req.tools) or '(none)'}")
    vs_naive = (f" (naive append-everything: {naive}, {naive / max(req.total_tokens, 1):.1f}x)"
                if naive is not None else "")
    typer.echo(f"--- tokens: static prefix {req.static_prefix_tokens}, total "
               f"{req.total_tokens}{vs_naive}; prefix_hash {req.prefix_hash[:16]}")
    typer.echo("--- trace ---")
    typer.echo(f"{'processor':<20}{'tokens+':>9}{'us':>9}  detail")
    for step in req.trace:
        detail = json.dumps(step.detail, default=str)
        typer.echo(f"{step.name:<20}{step.tokens_added:>9}{step.micros:>9}  {detail[:90]}")
    typer.echo("")


def _preview(content: Content, width: int = 110) -> str:
    parts = []
    for part in content.parts:
        if part.text is not None:
            parts.append(part.text)
        elif part.function_call is not None:
            call = part.function_call
            parts.append(f"call {call.name}({json.dumps(call.args)})")
        elif part.function_response is not None:
            resp = part.function_response
            parts.append(f"result {resp.name}: {json.dumps(resp.response)}")
    text = " | ".join(parts).replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


if __name__ == "__main__":
    app()
