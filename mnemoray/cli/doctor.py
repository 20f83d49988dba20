"""`mnemoray doctor [--repair] STORE`: check a memory store's files, and repair them."""

from __future__ import annotations

import json

import typer


def doctor(
    store: str = typer.Argument(..., help="Memory store directory (Parquet)."),
    repair: bool = typer.Option(
        False,
        "--repair",
        help="Rebuild lost indexes, quarantine unreadable segments, "
        "drop lost ledger files, rebuild a lost manifest.",
    ),
    shards: int | None = typer.Option(
        None,
        "--shards",
        min=1,
        help="Rebuilding a manifest: the store's shard count "
        "(default: inferred from where tenants are).",
    ),
    embedding_model: str | None = typer.Option(
        None,
        "--embedding-model",
        help="Rebuilding a manifest of a store with vectors: the "
        "model id it was built with (only the manifest names it).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Check the manifest, every segment, index, ledger and tombstone file; one line per
    problem. Exit code 0: healthy (after --repair: repaired); 1: problems are left."""
    from mnemoray.memory.store.ops.doctor import diagnose
    from mnemoray.memory.store.ops.doctor import repair as repair_store
    from mnemoray.memory.store.protocol import open_backend, parse_location, require_parquet

    kind, root = parse_location(store)
    if kind != "parquet":  # checks manifest, segments, FAISS indexes: the Parquet layout
        require_parquet(open_backend(store), "`mnemoray doctor`")
    if not root.is_dir():
        typer.echo(f"error: no memory store at {store} (not a directory)", err=True)
        raise typer.Exit(2)
    report = repair_store(root, shards, embedding_model) if repair else diagnose(root)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        for line in report.problems:
            typer.echo(f"problem: {line}")
        for line in report.repaired:
            typer.echo(f"repaired: {line}")
        if repair:
            for line in report.left:
                typer.echo(f"left: {line}")
        state = (
            "healthy"
            if report.healthy
            else f"{len(report.left)} problem(s)"
            + ("" if repair else f"; run `mnemoray doctor --repair {store}`")
        )
        typer.echo(
            f"{store}: {len(report.problems)} problem(s) found, "
            f"{len(report.repaired)} repair(s); {state}"
        )
    if not report.healthy:
        raise typer.Exit(1)
