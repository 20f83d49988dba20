"""`mnemoray export`, `import` and `stats`: a memory store as a whole."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from mnemoray.cli.store import require_store

STORE = typer.Option(
    ..., "--store", help="Memory store: a directory, parquet://DIR or lancedb://DIR."
)


def export_cmd(
    out: Path = typer.Argument(
        ..., dir_okay=False, help="JSONL file to write (a header line, then one memory per line)."
    ),
    store: str = STORE,
) -> None:
    """Write every live memory, embeddings included, as JSON lines (lossless)."""
    from mnemoray.memory.store.protocol import open_backend

    require_store(store)
    count = open_backend(store).export_jsonl(out)
    typer.echo(f"exported {count} memories to {out}")


def import_cmd(
    source: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="A file `mnemoray export` wrote."
    ),
    store: str = typer.Option(
        ...,
        "--store",
        help="Memory store directory, parquet://DIR or lancedb://DIR (created if new).",
    ),
    shards: int | None = typer.Option(
        None, "--shards", min=1, help="Shards of a new store (default: the exported store's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Load an export into a store; memories it already holds are skipped (idempotent).
    The store must embed with the export's model (or be new)."""
    from mnemoray.memory.store.ops.transfer import read_export
    from mnemoray.memory.store.protocol import open_backend, parse_location

    kind, root = parse_location(store)
    try:
        if shards is None and kind == "parquet" and not (root / "manifest.json").is_file():
            header, _ = read_export(source, 1)
            shards = header.get("shards") if isinstance(header.get("shards"), int) else None
        result = open_backend(store, shards).import_jsonl(source)
    except UnicodeDecodeError as exc:
        typer.echo(
            f"error: {source}: not UTF-8 text, so not a `mnemoray export` file (byte {exc.start})",
            err=True,
        )
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(
            json.dumps(
                {"written": result.written, "skipped": result.skipped, "version": result.version}
            )
        )
    else:
        typer.echo(
            f"imported {result.written} memories ({result.skipped} already there); "
            f"store version {result.version}"
        )


def stats(
    store: str = typer.Argument(
        ..., help="Memory store directory, parquet://DIR or lancedb://DIR."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """What the store holds: memories per kind and app, users, shards, segments, bytes,
    the embedding model and the last batch run."""
    from mnemoray.memory.store.ops.stats import store_stats
    from mnemoray.memory.store.protocol import open_backend
    from mnemoray.sessions.events import iso

    require_store(store)
    s = store_stats(open_backend(store))
    if as_json:
        typer.echo(json.dumps(s, ensure_ascii=False))
        return
    kinds = ", ".join(f"{k} {n}" for k, n in s["kinds"].items()) or "-"
    apps = ", ".join(f"{a} {n}" for a, n in s["apps"].items()) or "-"
    run = s["last_run"]
    last = (
        "-"
        if run is None
        else (
            f"{run['kind']} {run['run_id']} {run['status']}, started "
            f"{iso(run['started_at']) if run['started_at'] else '?'}"
        )
    )
    layout = (
        f"shards: {s['shards']}\nsegments: {s['segments']} ({s['rows_stored']} rows "
        f"stored, forgotten/expired ones until `mnemoray compact`)"
        if s["backend"] == "parquet"
        else f"backend: lancedb ({s['rows_stored']} rows stored, expired ones until forgotten)"
    )
    typer.echo(
        f"memories: {s['memories']} ({kinds})\napps: {apps}\nusers: {s['users']}\n"
        f"{layout}\nbytes: "
        f"{s['bytes']['total']}\nembedding model: {s['embedding_model'] or '-'}"
        f" (dim {s['dim']})\nsummarizer: {s['summarizer'] or '-'}\nlast run: {last}\n"
        f"manifest version: {s['manifest_version']}"
    )
