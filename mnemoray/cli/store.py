"""`mnemoray recall`, `compact` and `gc`: read and maintain a memory store."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from mnemoray.cli.common import table_id, table_text
from mnemoray.memory.recall.modes import Mode
from mnemoray.memory.records.kinds import MEMORY_KINDS

# typer lists an Enum's values in help (a list of Literal it cannot take).
# (mypy cannot see members built from a dict; `misc`: that, on a functional Enum call.)
MemoryKindChoice = enum.Enum("MemoryKindChoice", {k: k for k in MEMORY_KINDS}, type=str)  # type: ignore[misc]

if TYPE_CHECKING:
    from mnemoray.memory.recall.result import RecallResult
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.memory.store.lance.store import LanceStore
    from mnemoray.memory.store.parquet.store import MemoryStore


def require_store(store: str | Path) -> None:
    """Exit 2 unless ``store`` (a path, parquet:// or lancedb:// URI) holds a store; a
    Parquet directory with data but no manifest raises StoreCorrupt (one line naming
    `mnemoray doctor --repair`)."""
    from mnemoray.memory.store.protocol import missing_store

    why = missing_store(store)
    if why is not None:
        typer.echo(f"error: {why}", err=True)
        raise typer.Exit(2)


def compact(
    store: str = typer.Option(
        ..., "--store", help="Memory store: a directory, parquet://DIR or lancedb://DIR."
    ),
    max_segment_rows: int = typer.Option(
        1_000_000,
        "--max-segment-rows",
        min=1,
        help="Segments with at least this many rows are left as they are.",
    ),
    keep_old: bool = typer.Option(
        False, "--keep-old", help="Leave the replaced files for a later `mnemoray gc`."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Merge each shard's small segments into one (dead rows dropped), in one atomic commit
    (LanceDB: rewrite each table's files without deleted rows; `mnemoray gc` then erases
    the older versions)."""
    from mnemoray.memory.store.ops.merge import compact_store
    from mnemoray.memory.store.protocol import open_backend

    require_store(store)
    backend = open_backend(store)
    if backend.backend == "lancedb":  # LanceStore (no import: its extra may be missing)
        versions = cast("LanceStore", backend).compact()
        typer.echo(
            json.dumps({"backend": "lancedb", "versions": versions})
            if as_json
            else "tables compacted: " + ", ".join(f"{k} (version {v})" for k, v in versions.items())
        )
        return
    try:
        report = compact_store(
            cast("MemoryStore", backend), max_segment_rows=max_segment_rows, delete_old=not keep_old
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
        return
    typer.echo(
        f"shards compacted: {len(report.shards)}\nsegments: {report.segments_before} "
        f"-> {report.segments_after}\nrows dropped (forgotten/expired): "
        f"{report.rows_dropped}\nledger files: {report.ledger_files_before} -> "
        f"{report.ledger_files_after}\ntombstones retired: {report.tombstones_retired}"
        f"\nfiles removed: {len(report.files_removed)}\nversion: "
        f"{report.version_before} -> {report.version}\nseconds: {report.seconds:.2f}"
    )


def gc(
    store: str = typer.Option(
        ..., "--store", help="Memory store: a directory, parquet://DIR or lancedb://DIR."
    ),
    grace_s: float = typer.Option(
        3600.0,
        "--grace-s",
        min=0.0,
        help="Keep unlisted files younger than this (a running "
        "job's prepared segments; LanceDB: table versions a "
        "reader may still use).",
    ),
) -> None:
    """Delete files no committed manifest lists (a killed job's uncommitted segments, the
    segments a compaction replaced); LanceDB: table versions older than --grace-s."""
    from mnemoray.memory.store.protocol import open_backend

    require_store(store)
    backend = open_backend(store)
    if backend.backend == "lancedb":  # LanceStore: table versions, not manifest files
        gone = cast("LanceStore", backend).gc(grace_s=grace_s)
        typer.echo(
            f"removed {gone['versions']} old table version(s), {gone['bytes']} bytes", err=True
        )
        return
    removed = cast("MemoryStore", backend).gc(grace_s=grace_s)
    for path in removed:
        typer.echo(str(path))
    typer.echo(f"removed {len(removed)} file(s)", err=True)


def recall(
    query: str | None = typer.Argument(None, help="What to recall (with --app and --user)."),
    store: str = typer.Option(
        ..., "--store", help="Memory store: a directory, parquet://DIR or lancedb://DIR."
    ),
    app_name: str | None = typer.Option(None, "--app", help="App of the user."),
    user_id: str | None = typer.Option(None, "--user", help="User whose memories to search."),
    top_k: int = typer.Option(
        5, "--top-k", min=1, help="Memories to return (batch: the default for lines without top_k)."
    ),
    queries: Path | None = typer.Option(
        None, "--queries", exists=True, dir_okay=False, help="Batch mode: a JSONL file of queries."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Batch mode: write results here (default: stdout)."
    ),
    mode: Mode | None = typer.Option(
        None,
        "--mode",
        help="Signals to rank by (default: the app's recall.mode from --config, else hybrid).",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        help="Settings file (YAML/JSON): its recall group sets "
        "the ranking (RetrievalConfig fields, per app under "
        "recall.apps.<app_name>).",
    ),
    embedder: str = typer.Option(
        "default",
        "--embedder",
        help="'default' (the store's model), a model path or hub name, or 'none' (keyword-only).",
    ),
    session_id: str | None = typer.Option(None, "--session-id", help="Only this session."),
    after: str | None = typer.Option(
        None,
        "--after",
        help="Only memories of events at or after this time (ISO-8601 or epoch seconds).",
    ),
    before: str | None = typer.Option(
        None, "--before", help="Only memories of events at or before this time."
    ),
    kinds: list[MemoryKindChoice] | None = typer.Option(
        None, "--kind", help="Only this memory kind (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    all_users: bool = typer.Option(
        False,
        "--all-users",
        help="Search every user of --app (no --user); each result names its user.",
    ),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="Recall as this agent: the "
        "shared memories plus its agent-only ones (default: "
        "the shared ones only).",
    ),
    budget_tokens: int | None = typer.Option(
        None,
        "--budget-tokens",
        min=1,
        help="One query: the best memories whose text fits in this many tokens.",
    ),
) -> None:
    """Recall memories of one user (or of every user of an app: --all-users), or answer
    a batch of queries.

    Batch mode: --queries FILE.jsonl, one query per line:
    {"qid", "app_name", "user_id", "query", "top_k"?, "filters"?}
    (filters: session_id, after, before, kinds).
    Output: one line per query, in input order:
    {"qid", "memories": [...], "took_ms"}.
    A bad line gives {"qid", "line", "error"}; the run goes on, then exits with code 1.

    Exit codes (one query): 0 it was searched (no match prints "(no match ...)");
    1 the app, or the user in it, has no memories at all (a typo, or nothing
    ingested yet): nothing was searched; 2 bad input.
    """
    import time

    from mnemoray.errors import InvalidInput
    from mnemoray.memory.records.agent_names import check_agent_name
    from mnemoray.memory.records.filters import RecallFilters
    from mnemoray.settings.base import recall_settings_from_file
    from mnemoray.settings.scopes import scope_settings_from_file

    try:
        ranking = recall_settings_from_file(config) if config is not None else None
        scopes = scope_settings_from_file(config) if config is not None else None
    except ValueError as exc:  # ConfigError: names the setting
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    try:
        check_agent_name(agent or "")
    except InvalidInput as exc:
        raise typer.BadParameter(exc.reason, param_hint="--agent") from exc
    require_store(store)
    if queries is None:
        if all_users and (user_id or not (query and app_name)):
            raise typer.BadParameter(
                "searches every user of --app: pass --app and a QUERY, without --user",
                param_hint="--all-users",
            )
        if not (query and app_name and (user_id or all_users)):
            raise typer.BadParameter("pass --app, --user and a QUERY, or --queries FILE.jsonl")
        try:
            filters = RecallFilters(
                session_id=session_id,
                # RecallFilters parses ISO-8601 and epoch-second strings itself.
                after=cast("float | None", after),
                before=cast("float | None", before),
                kinds=tuple(k.value for k in kinds) if kinds else None,
                agent_name=agent,
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    elif query or app_name or user_id or all_users or agent:
        raise typer.BadParameter(
            "--queries takes its app, user, query and filters (agent_name among them) from the file"
        )
    service = open_for_recall(
        store,
        None if mode == "keyword" else embedder,
        ranking.default if ranking else None,
        ranking.app_configs if ranking else None,
    )
    if scopes is not None:  # agent-only memories, cross-app sharing (scopes group)
        service.scopes = scopes.policy
    if queries is None and all_users:
        from mnemoray.cli.recall_app import recall_all_users

        assert app_name and query  # checked above
        recall_all_users(service, app_name, query, top_k, filters, mode, as_json)
        return
    if queries is None:
        assert app_name and user_id and query  # checked above
        nothing = no_memories_at_all(service, app_name, user_id)
        if nothing:
            if as_json:
                typer.echo(
                    json.dumps(
                        {
                            "app_name": app_name,
                            "user_id": user_id,
                            "query": query,
                            "memories": [],
                            "took_ms": 0.0,
                        },
                        ensure_ascii=False,
                    )
                )
            typer.echo(nothing, err=True)
            raise typer.Exit(1)
        start = time.perf_counter()
        try:
            request = service.resolve(
                app_name, user_id, query, top_k, filters, mode, budget_tokens=budget_tokens
            )
            results = service.recall(request)
        except ValueError as exc:  # InvalidInput, and the filters' own checks
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        took = round((time.perf_counter() - start) * 1000, 3)
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "app_name": app_name,
                        "user_id": user_id,
                        "query": query,
                        "memories": [r.to_dict() for r in results],
                        "took_ms": took,
                    },
                    ensure_ascii=False,
                )
            )
        else:
            _print_recall(results, app_name)
        return
    failed = _recall_batch(service, queries, out, top_k, mode)
    if failed:
        typer.echo(f'{failed} query line(s) failed; see their "error"', err=True)
        raise typer.Exit(1)


def open_for_recall(
    store: str | Path, embedder: str | None, config: Any = None, app_configs: Any = None
) -> MemoryService:
    """The service a recall runs on: its query embedder opened by the one resolver for
    the "query" purpose (the packaged model on the parity-gated ONNX runtime, as the
    pipeline and Serve use it; ONNX threads do not spin-wait between queries)."""
    from mnemoray.embedders.resolve import open_embedder
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.memory.store.protocol import open_backend
    from mnemoray.summarizers import get_summarizer

    root = open_backend(store)
    return MemoryService(
        root,
        open_embedder(embedder, root, "query"),
        get_summarizer("extractive"),
        config,
        app_configs=app_configs,
    )


def no_memories_at_all(service: MemoryService, app_name: str, user_id: str) -> str | None:
    """Why a recall has nothing to search (the app, or the user in it, has no live
    memory), told apart from a search that matched nothing; None when there is
    something to search."""
    snap = service.snapshot()
    if service.scopes.readable_apps(app_name) and service.has_memories(app_name, user_id, snap):
        return None  # some are shared with this app by another (memory scopes)
    if snap.count(app_name) == 0:
        return f"no memories at all for app {app_name!r} in this store (nothing searched)"
    if snap.count(app_name, user_id) == 0:
        return f"no memories at all for user {user_id!r} in app {app_name!r} (nothing searched)"
    return None


def _recall_batch(
    service: MemoryService, queries: Path, out: Path | None, default_top_k: int, mode: str | None
) -> int:
    """Answer every line of ``queries`` (mnemoray.memory.service.batch_recall): returns how many
    lines failed."""
    import contextlib
    import sys

    from mnemoray.memory.service.batch_recall import BatchRecall

    # One ranking thread: ranking is mostly Python, more threads measured slower
    # (benchmarks/README.md, "Batch recall").
    batch = BatchRecall(service, default_top_k=default_top_k, mode=mode)
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(out.open("w", encoding="utf-8")) if out else sys.stdout
        with queries.open("rb") as source:
            for answer in batch.answers(source):
                sink.write(json.dumps(answer, ensure_ascii=False) + "\n")
                sink.flush()
    return batch.failed


def _print_recall(results: list[RecallResult], app_name: str = "") -> None:
    from datetime import datetime, timezone

    if not results:
        typer.echo("(no match: none of the user's memories matches the query)")
        return
    # An owner column only when some memory is another app's (shared) or agent-only.
    owned = any(r.memory.app_name != app_name or r.memory.agent_name for r in results)
    owner_head = f"{'owner':<18}" if owned else ""
    typer.echo(f"{'#':>2}  {'score':>7}  {'kind':<18}{'date':<12}{owner_head}{'session':<18}text")
    for rank, r in enumerate(results, start=1):
        m = r.memory
        when = m.event_time_end if m.event_time_end is not None else m.created_at
        date = datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%d")
        owner = (
            f"{table_id(m.app_name + (f'/{m.agent_name}' if m.agent_name else '')):<18}"
            if owned
            else ""
        )
        typer.echo(
            f"{rank:>2}  {r.score:>7.4f}  {m.kind:<18}{date:<12}{owner}"
            f"{table_id(m.session_id):<18}{table_text(m.text)}"
        )
