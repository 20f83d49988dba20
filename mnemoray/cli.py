"""The `mnemoray` command line."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mnemoray.compiler.request import CompiledRequest, Content

if TYPE_CHECKING:
    from mnemoray.memory.retrieval import RecallResult
    from mnemoray.memory.service import MemoryService

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


@app.command("backfill")
def backfill_cmd(
    archive: Path = typer.Option(..., "--archive", exists=True,
                                 help="Parquet/JSONL/ADK-JSON session archive (file or "
                                 "directory)."),
    store: Path = typer.Option(..., "--store", help="Memory store directory (created if new)."),
    shards: int | None = typer.Option(None, "--shards", min=1,
                                      help="Shards of a new store (default 8; an existing "
                                      "store keeps its own)."),
    summarizer: str = typer.Option("extractive", "--summarizer",
                                   help="Summarizer backend name (extractive, transformers, "
                                   "openai, vllm)."),
    embedder: str = typer.Option("default", "--embedder",
                                 help="'default' (the store's model, MiniLM for a new store), a "
                                 "local model path or hub name, or 'none' for keyword-only."),
    batch_sessions: int = typer.Option(256, "--batch-sessions", min=1,
                                       help="Sessions per commit."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Distill archived sessions into a memory store (idempotent; bad rows are quarantined)."""
    from mnemoray.memory.backfill import backfill as run_backfill

    try:
        report = run_backfill(archive, store, shards=shards, summarizer=summarizer,
                              embedder=embedder, batch_sessions=batch_sessions)
    except ValueError as exc:  # StoreError, EmbedderError, unknown summarizer, bad archive
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
        return
    typer.echo(f"sessions read: {report.sessions_read}\nskipped: {report.skipped}\n"
               f"quarantined: {report.quarantined}\nmemories written: "
               f"{report.memories_written}\nseconds: {report.seconds:.2f}")


@app.command()
def recall(
    query: str | None = typer.Argument(None, help="What to recall (with --app and --user)."),
    store: Path = typer.Option(..., "--store", help="Memory store directory."),
    app_name: str | None = typer.Option(None, "--app", help="App of the user."),
    user_id: str | None = typer.Option(None, "--user", help="User whose memories to search."),
    top_k: int = typer.Option(5, "--top-k", min=1, help="Memories to return (batch: the "
                              "default for lines without top_k)."),
    queries: Path | None = typer.Option(None, "--queries", exists=True, dir_okay=False,
                                        help="Batch mode: a JSONL file of queries."),
    out: Path | None = typer.Option(None, "--out", help="Batch mode: write results here "
                                    "(default: stdout)."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid | dense | keyword."),
    embedder: str = typer.Option("default", "--embedder",
                                 help="'default' (the store's model), a model path or hub "
                                 "name, or 'none' (keyword-only)."),
    session_id: str | None = typer.Option(None, "--session-id", help="Only this session."),
    after: str | None = typer.Option(None, "--after", help="Only memories of events at or "
                                     "after this time (ISO-8601 or epoch seconds)."),
    before: str | None = typer.Option(None, "--before", help="Only memories of events at or "
                                      "before this time."),
    kinds: list[str] | None = typer.Option(None, "--kind", help="Only this memory kind "
                                           "(repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Recall memories of one user, or answer a batch of queries.

    Batch mode: --queries FILE.jsonl, one query per line:
    {"qid", "app_name", "user_id", "query", "top_k"?, "filters"?}
    (filters: session_id, after, before, kinds).
    Output: one line per query, in input order:
    {"qid", "memories": [...], "took_ms"}.
    A bad line gives {"qid", "line", "error"}; the run goes on, then exits with code 1.
    """
    import time

    from mnemoray.memory.manifest import StoreError
    from mnemoray.memory.retrieval import RecallFilters, check_mode
    from mnemoray.memory.service import MemoryService

    try:
        check_mode(mode)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--mode") from exc
    if not (store / "manifest.json").is_file():
        typer.echo(f"error: no memory store at {store} (no manifest.json)", err=True)
        raise typer.Exit(2)
    if queries is None:
        if not (query and app_name and user_id):
            raise typer.BadParameter("pass --app, --user and a QUERY, or --queries FILE.jsonl")
        try:
            filters = RecallFilters(session_id=session_id, after=after, before=before,
                                    kinds=tuple(kinds) if kinds else None)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    elif query or app_name or user_id:
        raise typer.BadParameter("--queries takes its app, user and query from the file")
    try:
        service = MemoryService.open(store, embedder=None if mode == "keyword" else embedder)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if queries is None:
        start = time.perf_counter()
        try:
            results = service.search(app_name, user_id, query, top_k=top_k, filters=filters,
                                     mode=mode)
        except (StoreError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        took = round((time.perf_counter() - start) * 1000, 3)
        if as_json:
            typer.echo(json.dumps({"app_name": app_name, "user_id": user_id, "query": query,
                                   "memories": [r.to_dict() for r in results],
                                   "took_ms": took}, ensure_ascii=False))
        else:
            _print_recall(results)
        return
    failed = _recall_batch(service, queries, out, top_k, mode)
    if failed:
        typer.echo(f"{failed} query line(s) failed; see their \"error\"", err=True)
        raise typer.Exit(1)


def _recall_line(service: MemoryService, raw: object, default_top_k: int,
                 mode: str) -> dict[str, Any]:
    from mnemoray.memory.retrieval import RecallFilters

    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    unknown = set(raw) - {"qid", "app_name", "user_id", "query", "top_k", "filters"}
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown field")
    for name in ("app_name", "user_id", "query"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise ValueError(f"{name}: missing or not a non-empty string")
    top_k = raw.get("top_k", default_top_k)
    if top_k is None:
        top_k = default_top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k: must be a positive integer, got {top_k!r}")
    filters = RecallFilters.from_dict(raw.get("filters"))
    results = service.search(raw["app_name"], raw["user_id"], raw["query"], top_k=top_k,
                             filters=filters, mode=mode)
    return {"memories": [r.to_dict() for r in results]}


def _recall_batch(service: MemoryService, queries: Path, out: Path | None, default_top_k: int,
                  mode: str) -> int:
    """Answer every line of ``queries``; returns how many lines failed."""
    import contextlib
    import sys
    import time

    failed = 0
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(out.open("w", encoding="utf-8")) if out else sys.stdout
        with queries.open("rb") as source:
            for lineno, line in enumerate(source, start=1):
                if not line.strip():
                    continue
                start = time.perf_counter()
                qid = None
                try:
                    try:
                        raw = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") \
                            from exc
                    qid = raw.get("qid") if isinstance(raw, dict) else None
                    answer = {"qid": qid, **_recall_line(service, raw, default_top_k, mode)}
                    answer["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
                except (ValueError, TypeError) as exc:  # bad line, bad field, bad filter
                    failed += 1
                    answer = {"qid": qid, "line": lineno, "error": str(exc)}
                sink.write(json.dumps(answer, ensure_ascii=False) + "\n")
                sink.flush()
    return failed


def _print_recall(results: list[RecallResult]) -> None:
    from datetime import datetime, timezone

    if not results:
        typer.echo("(no memories)")
        return
    typer.echo(f"{'#':>2}  {'score':>7}  {'kind':<18}{'date':<12}{'session':<18}text")
    for rank, r in enumerate(results, start=1):
        m = r.memory
        when = m.event_time_end if m.event_time_end is not None else m.created_at
        date = datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%d")
        text = " / ".join(line.strip() for line in m.text.splitlines() if line.strip())
        text = text if len(text) <= 100 else text[:97] + "..."
        session = m.session_id if len(m.session_id) <= 16 else m.session_id[:15] + "…"
        typer.echo(f"{rank:>2}  {r.score:>7.4f}  {m.kind:<18}{date:<12}{session:<18}{text}")


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
