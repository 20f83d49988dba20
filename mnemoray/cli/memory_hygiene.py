"""`mnemoray memory ...`: correct, inspect and forget one user's memories in a store.

    mnemoray memory edit ID --store S --app A --user U --text "corrected words"
    mnemoray memory versions ID --store S --app A --user U
    mnemoray memory forget --store S --app A --user U --query "my old address" --dry-run
    mnemoray memory forget --store S --app A --user U --confirm TOKEN --reason "user asked"
    mnemoray forget --store S --app A --user U --session SID --dry-run   (also --id, --all)
    mnemoray memory forgotten --store S --app A --user U
    mnemoray memory forget-user --store S --app A --user U --reason "user asked"

Every change is recorded as made by ``--actor`` (default ``cli:<login name>``).
The commands call the one ``MemoryService``, as the HTTP API does.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mnemoray.cli.store import require_store

if TYPE_CHECKING:
    from mnemoray.memory.records.record import Memory
    from mnemoray.memory.service.service import MemoryService

STORE = typer.Option(
    ..., "--store", help="Memory store: a directory, parquet://DIR or lancedb://DIR."
)
APP = typer.Option(..., "--app", help="App of the user.")
USER = typer.Option(..., "--user", help="User whose memories these are.")
ACTOR = typer.Option(None, "--actor", help="Who makes the change (default cli:<login>).")
EMBEDDER = typer.Option(
    "default",
    "--embedder",
    help="'default' (the store's model), a model path or hub name, or 'none' (keyword-only store).",
)
JSON = typer.Option(False, "--json", help="Print the result as JSON.")


def _actor(actor: str | None) -> str:
    if actor:
        return actor
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "cli"


def _open(
    store: str | Path, embedder: str | None = "default", *, changes: bool = True
) -> MemoryService:
    from mnemoray.memory.hygiene.attach import attach_forget_effects
    from mnemoray.memory.service.service import MemoryService

    require_store(store)
    service = MemoryService.open(store, embedder=embedder)
    if changes:  # forgets reach summaries and queued ingestion, as in the server
        attach_forget_effects(service)
    return service


def _echo(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False))


def edit(
    memory_id: str = typer.Argument(..., help="The memory to correct."),
    store: str = STORE,
    app_name: str = APP,
    user_id: str = USER,
    text: str = typer.Option(..., "--text", help="The corrected text."),
    actor: str | None = ACTOR,
    embedder: str = EMBEDDER,
    as_json: bool = JSON,
) -> None:
    """Replace a memory's text (re-embedded); the old text is kept as a version."""
    service = _open(store, embedder)
    new = service.edit_memory(app_name, user_id, memory_id, text, actor=_actor(actor))
    if as_json:
        _echo({"memory": new.to_dict(), "replaced": memory_id})
        return
    typer.echo(
        f"memory {memory_id} -> {new.memory_id}\nedited by: {new.edited_by}\n"
        f"versions: {len(new.previous_versions) + 1}"
    )


def versions(
    memory_id: str = typer.Argument(..., help="The memory (current or earlier id)."),
    store: str = STORE,
    app_name: str = APP,
    user_id: str = USER,
    as_json: bool = JSON,
) -> None:
    """Every text of a memory, oldest first."""
    out = _open(store, None, changes=False).memory_versions(app_name, user_id, memory_id)
    if as_json:
        _echo(out)
        return
    from mnemoray.sessions.events import iso

    for v in out["versions"]:
        mark = "*" if v["current"] else " "
        typer.echo(
            f"{mark} {v['memory_id']}  {iso(v['written_at'])}  "
            f"{v['written_by'] or '-'}  {v['text']}"
        )


def forget(
    store: str = STORE,
    app_name: str = APP,
    user_id: str = USER,
    memory_id: str | None = typer.Option(None, "--id", help="Forget this memory."),
    session_id: str | None = typer.Option(
        None, "--session", help="Forget every memory of this session."
    ),
    whole_user: bool = typer.Option(False, "--all", help="Forget every memory of the user."),
    query: str | None = typer.Option(
        None, "--query", help="Preview a forget by query (with --dry-run)."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="List what would be "
        "forgotten and forget nothing (--query: also print "
        "a confirm token).",
    ),
    top_k: int = typer.Option(
        10, "--top-k", min=1, max=100, help="Memories a --query preview may list."
    ),
    confirm: str | None = typer.Option(
        None, "--confirm", help="Forget exactly what the preview with this token listed."
    ),
    only: list[str] | None = typer.Option(
        None, "--only", help="With --confirm: only this previewed memory (repeatable)."
    ),
    reason: str = typer.Option("", "--reason", help="Why (kept on the record)."),
    actor: str | None = ACTOR,
    embedder: str = EMBEDDER,
    as_json: bool = JSON,
) -> None:
    """Forget one memory (--id), a session (--session) or the whole user (--all), each
    previewable with --dry-run; or by query: --query Q --dry-run, then --confirm TOKEN.
    Exit code 1 when nothing matched."""
    steps = [s for s in (memory_id, session_id, query, confirm) if s is not None]
    if len(steps) + whole_user != 1:
        raise typer.BadParameter(
            "pass exactly one of --id, --session, --all, --query (with --dry-run) or --confirm"
        )
    if query is not None and not dry_run:
        raise typer.BadParameter(
            "preview first: --query Q --dry-run prints a confirm token, "
            "then --confirm TOKEN forgets exactly that",
            param_hint="--query",
        )
    if dry_run and confirm is not None:
        raise typer.BadParameter(
            "--confirm forgets what a --dry-run listed; drop --dry-run", param_hint="--dry-run"
        )
    service = _open(store, embedder if query is not None else None)
    who = _actor(actor)
    if query is not None:
        out: dict[str, Any] = service.preview_forget(
            app_name, user_id, query, top_k=top_k
        ).to_dict()
    elif confirm is not None:
        out = service.confirm_forget(
            app_name, user_id, confirm, memory_ids=only or None, reason=reason, actor=who
        )
    elif dry_run:
        out = {
            "dry_run": True,
            "memories": [
                m.to_dict() for m in _covered(service, app_name, user_id, memory_id, session_id)
            ],
        }
        out["memory_ids"] = [m["memory_id"] for m in out["memories"]]
    elif memory_id is not None:
        n = service.forget_memory(app_name, user_id, memory_id, reason=reason, actor=who)
        out = {"forgotten": n, "memory_ids": [memory_id] if n else []}
    elif session_id is not None:
        out = {
            "forgotten": service.forget_session(
                app_name, user_id, session_id, reason=reason, actor=who
            )
        }
    else:
        out = {"forgotten": service.forget_user(app_name, user_id, reason=reason, actor=who)}
    if as_json:
        _echo(out)
    elif out.get("dry_run"):
        for m in out["memories"]:
            typer.echo(f"{m['memory_id']}  {m['kind']:<16} {m['text'][:100]!r}")
        token = out.get("confirm_token")
        typer.echo(
            f"would forget {len(out['memory_ids'])} memories"
            + (f"; to forget exactly these:\n--confirm {token}" if token else "")
        )
    else:
        typer.echo(f"forgotten: {out['forgotten']}")
    if not (out["memory_ids"] if out.get("dry_run") else out.get("forgotten")) and confirm is None:
        what = (
            f"memory {memory_id!r}"
            if memory_id is not None
            else f"memories of session {session_id!r}"
            if session_id is not None
            else "memories matching the query"
            if query is not None
            else "memories"
        )
        typer.echo(f"error: no {what} for user {user_id!r} in app {app_name!r}", err=True)
        raise typer.Exit(1)


def _covered(
    service: MemoryService,
    app_name: str,
    user_id: str,
    memory_id: str | None,
    session_id: str | None,
) -> list[Memory]:
    """The live memories a forget by id, session or user (neither) would remove."""
    snap = service.snapshot()
    if memory_id is not None:
        found = snap.get(memory_id, (app_name, user_id))
        return [found] if found is not None else []
    rows = snap.rows_for_user(app_name, user_id)
    return [m for m in rows if session_id is None or m.session_id == session_id]


def forgotten(
    store: str = STORE, app_name: str = APP, user_id: str = USER, as_json: bool = JSON
) -> None:
    """The user's forget records: what was forgotten, when, why and by whom."""
    records = _open(store, None, changes=False).forgotten(app_name, user_id)
    if as_json:
        _echo({"records": records})
        return
    from mnemoray.sessions.events import iso

    for r in records:
        what = r["memory_id"] or r["session_id"] or "(all)"
        typer.echo(
            f"{iso(r['at'])}  {r['scope']:<7} {what}  {r['actor'] or '-'}  {r['reason'] or '-'}"
        )


# (name, function): cli.main adds each to `mnemoray memory` (cli.memory_group), with its
# one-line errors.
def forget_user(
    store: str = STORE,
    app_name: str = APP,
    user_id: str = USER,
    sessions_db: str | None = typer.Option(
        None,
        "--sessions",
        metavar="<file|url>",
        help="Session database: a SQLite file (default: STORE/sessions.db) or a "
        "postgresql:// URL (sessions and jobs there).",
    ),
    artifacts_dir: str | None = typer.Option(
        None, "--artifacts", metavar="<dir>", help="Artifacts folder (default: STORE/artifacts)."
    ),
    reason: str = typer.Option("", "--reason", help="Why (kept on the erasure's record)."),
    actor: str | None = ACTOR,
    as_json: bool = JSON,
) -> None:
    """Forget everything about a user: queued ingestion jobs, sessions, artifacts, then
    memories (as DELETE /v1/users/APP/USER). Safe to repeat: a second run finishes an
    interrupted one and reports zeros for what is gone."""
    from mnemoray.memory.hygiene.erasure import store_erasure
    from mnemoray.memory.service.json_ops import MemoryOps
    from mnemoray.memory.store.protocol import parse_location

    service = _open(store, None)
    folder = parse_location(store)[1]
    ops = MemoryOps(service)
    try:
        with store_erasure(
            lambda op, app, user, **kw: ops.call(op, app, user, kw),
            sessions_db or folder / "sessions.db",
            artifacts_dir or folder / "artifacts",
        ) as erasure:
            out = erasure.forget_user(app_name, user_id, reason=reason, actor=_actor(actor))
    finally:
        service.close()
    if as_json:
        _echo(out)
    else:
        removed = ", ".join(f"{k}: {v}" for k, v in out["removed"].items())
        typer.echo(f"erased user {user_id!r} of app {app_name!r}: {removed}")


MEMORY_COMMANDS: list[tuple[str, Callable[..., Any]]] = [
    ("edit", edit),
    ("versions", versions),
    ("forget", forget),
    ("forgotten", forgotten),
    ("forget-user", forget_user),
]
