"""`mnemoray recall --all-users`: app-wide recall, every user of one app, on a local store.

The same search as ``MemoryService.search_app`` and ``POST /v1/apps/{app}/recall``: each
result names its user. Local only: whoever can read the store directory can read every
user's memories already (over HTTP an app-wide API key is needed).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import typer

from mnemoray.cli.common import table_id, table_text

if TYPE_CHECKING:
    from mnemoray.memory.recall.result import RecallResult
    from mnemoray.memory.records.filters import RecallFilters
    from mnemoray.memory.service.service import MemoryService


def recall_all_users(
    service: MemoryService,
    app_name: str,
    query: str,
    top_k: int,
    filters: RecallFilters,
    mode: str | None,
    as_json: bool,
) -> None:
    """Print the app-wide answer; exit 1 when the app has no memories at all, 2 on bad
    input (as a one-user recall does)."""
    if service.snapshot().count(app_name) == 0:
        if as_json:
            typer.echo(
                json.dumps(
                    {"app_name": app_name, "query": query, "memories": [], "took_ms": 0.0},
                    ensure_ascii=False,
                )
            )
        typer.echo(
            f"no memories at all for app {app_name!r} in this store (nothing searched)", err=True
        )
        raise typer.Exit(1)
    start = time.perf_counter()
    try:
        results = service.recall(service.resolve(app_name, None, query, top_k, filters, mode))
    except ValueError as exc:  # InvalidInput, and the filters' own checks
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    took = round((time.perf_counter() - start) * 1000, 3)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "app_name": app_name,
                    "query": query,
                    "memories": [{**r.to_dict(), "user_id": r.memory.user_id} for r in results],
                    "took_ms": took,
                },
                ensure_ascii=False,
            )
        )
    else:
        print_app_recall(results)


def print_app_recall(results: list[RecallResult]) -> None:
    if not results:
        typer.echo("(no match: none of the app's memories matches the query)")
        return
    typer.echo(f"{'#':>2}  {'score':>7}  {'user':<18}{'kind':<18}text")
    for rank, r in enumerate(results, start=1):
        m = r.memory
        typer.echo(
            f"{rank:>2}  {r.score:>7.4f}  {table_id(m.user_id):<18}{m.kind:<18}{table_text(m.text)}"
        )
