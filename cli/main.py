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
    compile_only: bool = typer.Option(False, "--compile-only",
                                      help="Stop after the compile demo (no Ray)."),
    port: int = typer.Option(8011, help="Port of the demo's Serve app (127.0.0.1)."),
) -> None:
    """The main job on the embedded default: a long session compacted and compiled; then
    a generated archive backfilled on Ray Data, served by Ray Serve, recalled and
    compiled over HTTP."""
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
    if not compile_only:
        from jobs.demo import run  # Ray is imported only here

        run(root / "e2e", port)


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
    summarizer_options: list[str] | None = typer.Option(
        None, "--summarizer-option", help="KEY=VALUE for the summarizer backend (repeatable), "
        "e.g. model=/models/qwen, max_tokens=512, fallback=extractive; JSON values allowed."),
    embedder: str = typer.Option("default", "--embedder",
                                 help="'default' (the store's model, MiniLM for a new store), a "
                                 "local model path or hub name, or 'none' for keyword-only."),
    batch_sessions: int = typer.Option(256, "--batch-sessions", "--commit-every", min=1,
                                       help="Sessions per commit (a killed job keeps every "
                                       "committed chunk)."),
    in_process: bool = typer.Option(False, "--in-process",
                                    help="Run the in-process backfill instead of Ray Data."),
    ray_address: str | None = typer.Option(None, "--ray-address",
                                           help="Ray cluster to run on (default: RAY_ADDRESS "
                                           "if set, as under `ray job submit`, else a new "
                                           "local Ray instance)."),
    workers: int = typer.Option(1, "--workers", min=1,
                                help="Ray: most actors per pool (distill, embed); they "
                                "autoscale from 1."),
    batch_size: int = typer.Option(64, "--batch-size", min=1,
                                   help="Ray: sessions per distill/embed batch."),
    gpus_per_embedder: float = typer.Option(0.0, "--gpus-per-embedder", min=0.0,
                                            help="Ray: GPUs per embedding actor (0: CPU)."),
    embed_runtime: str = typer.Option("auto", "--embed-runtime",
                                      help="Ray, CPU: 'auto' embeds the packaged MiniLM with "
                                      "its parity-gated ONNX build (same vectors, ~1.9x "
                                      "faster), 'torch' with sentence-transformers."),
    embed_threads: int | None = typer.Option(None, "--embed-threads", min=1,
                                             help="Ray: intra-op threads per embed actor "
                                             "(default: the runtime's own)."),
    llm_concurrency: int = typer.Option(1, "--llm-concurrency", min=1,
                                        help="Ray, --summarizer vllm: vLLM engine replicas."),
    llm_batch_size: int = typer.Option(64, "--llm-batch-size", min=1,
                                       help="Ray, --summarizer vllm: rows per engine batch."),
    progress_every: float = typer.Option(10.0, "--progress-every", min=0.0,
                                         help="Seconds between progress lines when stderr is "
                                         "not a terminal."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Distill archived sessions into a memory store (idempotent; bad rows are quarantined).

    Runs on Ray Data (a local Ray instance unless --ray-address / RAY_ADDRESS
    says otherwise); --in-process runs the same steps in this process.
    """
    from mnemoray.memory.store import MemoryStore
    from mnemoray.summarizers.errors import BackendUnavailableError

    try:
        options = _parse_options(summarizer_options or [])
        MemoryStore(store, shards)  # a shard-count mismatch is reported before any work
        if in_process:
            report = _backfill_in_process(archive, store, shards, summarizer, options, embedder,
                                          batch_sessions, progress_every)
        else:
            from pipeline.backfill import BackfillConfig, run_backfill

            cfg = BackfillConfig(
                archive=str(archive), store=str(store), shards=shards, summarizer=summarizer,
                summarizer_options=options, embedder=embedder, batch_size=batch_size,
                commit_every=batch_sessions, workers=workers,
                gpus_per_embedder=gpus_per_embedder, embed_runtime=embed_runtime,
                embed_threads=embed_threads, llm_concurrency=llm_concurrency,
                llm_batch_size=llm_batch_size, ray_address=ray_address,
                progress_interval_s=progress_every)
            report = run_backfill(cfg).to_dict()
    except (ValueError, ImportError, BackendUnavailableError) as exc:  # StoreError,
        typer.echo(f"error: {exc}", err=True)  # EmbedderError, bad archive, no vLLM...
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report))
        return
    typer.echo(f"sessions read: {report['sessions_read']}\nskipped: {report['skipped']}\n"
               f"quarantined: {report['quarantined']}\nmemories written: "
               f"{report['memories_written']}\nseconds: {report['seconds']:.2f}\n"
               f"sessions/s: {report['sessions_per_s']:.1f}\n"
               f"run report: {report['report_path']}")


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}",
                                     param_hint="--summarizer-option")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def _backfill_in_process(archive: Path, store: Path, shards: int | None, summarizer: str,
                         options: dict[str, Any], embedder: str, batch_sessions: int,
                         progress_every: float) -> dict[str, Any]:
    """The in-process backfill, with the same progress lines and run report as on Ray."""
    from mnemoray.archive import estimate_rows
    from mnemoray.memory.backfill import BackfillReport
    from mnemoray.memory.backfill import backfill as run_backfill
    from mnemoray.memory.runs import Progress, RunRecorder
    from mnemoray.summarizers import get_summarizer

    summ = get_summarizer(summarizer, **options)
    config = {"archive": str(archive), "store": str(store), "shards": shards,
              "summarizer": summarizer, "summarizer_options": sorted(options),
              "embedder": embedder, "batch_sessions": batch_sessions}
    progress = Progress(estimate_rows(archive), interval_s=progress_every)
    recorder = RunRecorder(store, engine="in_process", config=config)

    def counts(r: BackfillReport) -> dict[str, int]:
        return {"sessions_read": r.sessions_read, "skipped": r.skipped,
                "quarantined": r.quarantined, "memories_written": r.memories_written}

    def on_batch(total: BackfillReport) -> None:
        recorder.update(counts(total))
        progress.update(total.sessions_read, f"memories {total.memories_written}  "
                        f"quarantined {total.quarantined}  skipped {total.skipped}")

    recorder.update(force=True)
    try:
        report = run_backfill(archive, store, shards=shards, summarizer=summ, embedder=embedder,
                              batch_sessions=batch_sessions, run_id=recorder.run_id,
                              progress=on_batch)
    except BaseException as exc:
        recorder.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    progress.close()
    recorder.update(counts(report))
    path = recorder.finish("succeeded")
    out = report.to_dict()
    out.update(run_id=recorder.run_id, report_path=str(path),
               sessions_per_s=round(report.sessions_read / report.seconds, 3)
               if report.seconds else 0.0)
    return out


@app.command()
def compact(
    store: Path = typer.Option(..., "--store", help="Memory store directory."),
    max_segment_rows: int = typer.Option(1_000_000, "--max-segment-rows", min=1,
                                         help="Segments with at least this many rows are "
                                         "left as they are."),
    keep_old: bool = typer.Option(False, "--keep-old",
                                  help="Leave the replaced files for a later `mnemoray gc`."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Merge each shard's small segments into one (dead rows dropped), in one atomic commit."""
    from mnemoray.memory.compact import compact_store
    from mnemoray.memory.store import MemoryStore

    if not (store / "manifest.json").is_file():
        typer.echo(f"error: no memory store at {store} (no manifest.json)", err=True)
        raise typer.Exit(2)
    try:
        report = compact_store(MemoryStore(store), max_segment_rows=max_segment_rows,
                               delete_old=not keep_old)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
        return
    typer.echo(f"shards compacted: {len(report.shards)}\nsegments: {report.segments_before} "
               f"-> {report.segments_after}\nrows dropped (forgotten/expired): "
               f"{report.rows_dropped}\nledger files: {report.ledger_files_before} -> "
               f"{report.ledger_files_after}\ntombstones retired: {report.tombstones_retired}"
               f"\nfiles removed: {len(report.files_removed)}\nversion: "
               f"{report.version_before} -> {report.version}\nseconds: {report.seconds:.2f}")


@app.command()
def gc(
    store: Path = typer.Option(..., "--store", help="Memory store directory."),
    grace_s: float = typer.Option(3600.0, "--grace-s", min=0.0,
                                  help="Keep unlisted files younger than this (a running "
                                  "job's prepared segments)."),
) -> None:
    """Delete files no committed manifest lists (a killed job's uncommitted segments)."""
    from mnemoray.memory.store import MemoryStore

    if not (store / "manifest.json").is_file():
        typer.echo(f"error: no memory store at {store} (no manifest.json)", err=True)
        raise typer.Exit(2)
    removed = MemoryStore(store).gc(grace_s=grace_s)
    for path in removed:
        typer.echo(str(path))
    typer.echo(f"removed {len(removed)} file(s)", err=True)


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


@app.command("serve")
def serve_cmd(
    store: Path = typer.Option(..., "--store", help="Memory store directory (created on "
                               "first write); sessions.db and artifacts/ live in it too."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="HTTP port."),
    host: str | None = typer.Option(None, "--host", help="Interface to bind. Only with API "
                                    "keys; without keys the server binds 127.0.0.1."),
    replicas: int = typer.Option(1, "--replicas", min=1, help="Ingress replicas."),
    api_keys: Path | None = typer.Option(None, "--api-keys", exists=True, dir_okay=False,
                                         help="JSON file {\"<key>\": \"app\" or [\"app\", "
                                         "...]} (default: $MNEMORAY_API_KEYS)."),
    embedder: str = typer.Option("default", "--embedder",
                                 help="'default' (the store's model, MiniLM for a new store), "
                                 "'onnx', a local model path or hub name, or 'none'."),
    settings: list[str] = typer.Option([], "--set", help="Any other serving setting as "
                                       "KEY=VALUE (repeatable; JSON values, dotted keys for "
                                       "nested ones: --set trigger.type=inactivity)."),
    direct_ingress: bool = typer.Option(False, "--direct-ingress",
                                        help="Ray Serve's throughput preset: each ingress "
                                        "replica also answers HTTP on its own port from "
                                        "PORT+1 (no proxy hop; ~2x recall throughput here)."),
) -> None:
    """Serve the HTTP API (recall, memories, sessions, compile, artifacts) on a local Ray
    instance; blocks until Ctrl-C. OpenAPI docs at /docs."""
    if direct_ingress:  # Serve reads these when its modules load: before the import
        from serve.settings import direct_ingress_env  # imports no Ray

        for key, value in direct_ingress_env(port, replicas).items():
            os.environ.setdefault(key, value)
    # serve/ wraps Ray; imported here so the rest of the CLI never loads Ray.
    from serve.app import resolve_keys, run_local
    from serve.auth import is_loopback
    from serve.settings import parse_settings

    args: dict[str, Any] = {"store": str(store), "replicas": replicas, "embedder": embedder}
    if api_keys is not None:
        args["api_keys"] = str(api_keys)
    try:
        options = _parse_options(settings)
    except typer.BadParameter as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    for key, value in options.items():
        *parents, leaf = key.split(".")
        node = args
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    try:
        keys = resolve_keys(parse_settings(args))
    except ValueError as exc:  # SettingsError, AuthConfigError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if host is None:
        host = "127.0.0.1"
    elif keys.open and not is_loopback(host):
        typer.echo("error: --host needs API keys (--api-keys FILE or MNEMORAY_API_KEYS); "
                   "without keys the server binds 127.0.0.1 only", err=True)
        raise typer.Exit(2)
    typer.echo(f"mnemoray: serving store {store} on http://{host}:{port} (docs: /docs)")
    if keys.open:
        typer.echo("mnemoray: no API keys configured: the API is OPEN, bound to 127.0.0.1 "
                   "only")
    else:
        typer.echo(f"mnemoray: {len(keys.digests)} API key(s); every route but /healthz "
                   f"needs one")
    run_local(args, host=host, port=port, direct_ingress=direct_ingress)


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
