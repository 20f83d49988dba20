"""`mnemoray graph`: what a user's entity graph holds around one entity.

Calls ``MemoryService.neighbours``, the rule ``GET /v1/graph/{app}/{user}`` answers
by. Exit codes: 2 for bad input (one line naming the flag), 1 when the entity is not
in the user's graph (the line names close matches).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import typer

from mnemoray.cli.common import error_line, table_id, table_text
from mnemoray.cli.store import require_store
from mnemoray.errors import InvalidInput, NotFound

FLAGS = {"depth": "--depth", "type": "--type", "at": "--at", "limit": "--limit", "entity": "ENTITY"}


def _day(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


def graph_cmd(
    entity: str = typer.Argument(..., help="An entity: a name or alias ('Mel') or its ent-... id."),
    store: str = typer.Option(..., "--store", help="Memory store directory (Parquet)."),
    app_name: str = typer.Option(..., "--app", help="App of the user."),
    user_id: str = typer.Option(..., "--user", help="User whose graph to read."),
    depth: int = typer.Option(2, "--depth", help="Hops from the entity (1 to 6)."),
    types: list[str] | None = typer.Option(
        None, "--type", help="Only relations of this type (repeatable): mentions, lives_in, ..."
    ),
    at: str | None = typer.Option(
        None,
        "--at",
        help="Only relations that held at this world time (ISO-8601 or epoch seconds).",
    ),
    limit: int = typer.Option(50, "--limit", help="Nodes to list, nearest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON."),
) -> None:
    """The entity, its facts and what is within --depth hops of it in a user's graph."""
    from mnemoray.memory.service.service import MemoryService

    require_store(store)
    service = MemoryService.open(store, embedder=None)
    try:
        answer = service.neighbours(
            app_name, user_id, entity, depth=depth, types=types, at=at, limit=limit
        )
    except NotFound as exc:
        typer.echo(f"error: {exc.reason}", err=True)
        raise typer.Exit(1) from exc
    except InvalidInput as exc:
        flag = FLAGS.get(exc.field or "")
        typer.echo(f"error: {flag}: {exc.reason}" if flag else error_line(exc), err=True)
        raise typer.Exit(2) from exc
    finally:
        service.close()
    if as_json:
        typer.echo(json.dumps(answer.to_dict(), ensure_ascii=False))
        return
    e = answer.entity
    aliases = ", ".join(a for a in e["aliases"] if a != e["name"])
    typer.echo(
        f"{e['name']} ({e['type']}, {e['entity_id']})"
        + (f"  aliases: {aliases}" if aliases else "")
        + f"  mentions: {e['mention_count']}"
    )
    names = {e["entity_id"]: e["name"]} | {
        n.node_id: n.name for n in answer.neighbours if n.kind == "entity"
    }
    if answer.facts:
        typer.echo(
            "facts"
            + (f" at {_day(answer.at)}" if answer.at is not None else " (holding now)")
            + ":"
        )
        for f in answer.facts:
            typer.echo(
                f"  {names.get(f['src'], table_id(f['src']))} {f['type']} "
                f"{names.get(f['dst'], table_id(f['dst']))}  "
                f"{_day(f['valid_from'])} .. {_day(f['valid_to'])}"
            )
    typer.echo(f"within {answer.depth} hop(s): {len(answer.neighbours)}")
    typer.echo(f"{'depth':>5}  {'via':<12} {'kind':<7} {'type':<16} name")
    for n in answer.neighbours:
        typer.echo(
            f"{n.depth:>5}  {n.relation['type']:<12} {n.kind:<7} {n.type:<16} "
            f"{table_text(n.name, 70)}"
        )


__all__ = ["graph_cmd"]
