"""`mnemoray ui --store DIR`: the memory inspector over a local store, without Ray.

The same FastAPI app as ``mnemoray serve`` (:func:`mnemoray.http.app.build_api`: the
JSON API and the page at ``/ui/``), over :class:`mnemoray.http.local_backend.LocalBackend`
in this process, served by uvicorn. Keys work as for ``mnemoray serve``; without keys
it binds 127.0.0.1 only and answers loopback clients only.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mnemoray.cli.common import parse_options, server_keys

DEFAULT_PORT = 8765


def missing_store(store_dir: Path, sessions_db: str) -> str | None:
    """Why ``mnemoray ui`` refuses the store, or None: a directory with no store head (a
    Parquet manifest or a LanceDB head) and no session database is a mistyped path, or a
    new empty folder, and opening it would silently create an empty store there."""
    from mnemoray.memory.store.layout import MANIFEST
    from mnemoray.memory.store.protocol import LANCE_HEAD
    from mnemoray.postgres import is_postgres_url

    if any((store_dir / name).is_file() for name in (MANIFEST, LANCE_HEAD)):
        return None
    if is_postgres_url(sessions_db) or (sessions_db != ":memory:" and Path(sessions_db).is_file()):
        return None
    return (
        f"no memory store at {store_dir} (no {MANIFEST}, {LANCE_HEAD} or session "
        f"database {sessions_db}); check the path, or create a store first: mnemoray "
        f"import FILE --store {store_dir}, mnemoray backfill --store {store_dir}, or "
        f"mnemoray serve over it"
    )


def page_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address
    return f"http://{shown}:{port}/ui/"


def ui_cmd(
    store: str = typer.Option(
        ...,
        "--store",
        help="An existing memory store directory, or "
        "parquet://DIR / lancedb://DIR; sessions.db and artifacts/ "
        "are read from it unless --sessions / --artifacts say.",
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Interface to bind; other than loopback only with API keys."
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="HTTP port."),
    # Strings, not paths: a URL given here is refused as typed (a Path folds its "//").
    sessions: str | None = typer.Option(
        None,
        "--sessions",
        metavar="<file|url>",
        help="Session database: a SQLite file (default: STORE/sessions.db) or a "
        "postgresql:// URL (sessions and jobs there).",
    ),
    artifacts: str | None = typer.Option(
        None, "--artifacts", metavar="<dir>", help="Artifacts folder (default: STORE/artifacts)."
    ),
    api_keys: Path | None = typer.Option(
        None,
        "--api-keys",
        exists=True,
        dir_okay=False,
        help='JSON file {"<key>": "app" or {"apps": '
        '[...], "app_wide": true}}, as for mnemoray serve.',
    ),
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        help="Query/write embedder (default: the store's model; 'none': keyword only).",
    ),
    settings: list[str] = typer.Option(
        [], "--set", help="Any other setting as KEY=VALUE (as for mnemoray serve)."
    ),
) -> None:
    """Open the memory inspector (a web page) over a local store; no Ray needed. Prints
    the page's URL and serves until Ctrl-C."""
    # Imported here: the rest of the CLI never loads the server stack.
    import uvicorn

    from mnemoray.errors import MnemorayError
    from mnemoray.http.app import build_api, http_config
    from mnemoray.http.connection_guard import connection_limits, guarded_protocol
    from mnemoray.http.local_backend import LocalBackend
    from mnemoray.settings.serve import load_settings

    try:
        flags = parse_options(settings)
    except typer.BadParameter as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    given = {
        "store": store,
        "ingestion.sessions_db": sessions,
        "ingestion.artifacts_dir": artifacts,
        "server.api_keys": api_keys,
        "models.embedder": embedder,
    }
    flags.update(
        {k: str(v) if isinstance(v, Path) else v for k, v in given.items() if v is not None}
    )
    try:
        s = load_settings(flags)
    except MnemorayError as exc:  # ConfigError (a setting)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    keys = server_keys(s, host, "the inspector")
    missing = missing_store(s.store_dir, s.sessions_path)
    if missing is not None:
        typer.echo(f"error: {missing}", err=True)
        raise typer.Exit(2)
    backend = LocalBackend(s)
    try:
        api = build_api(backend, http_config(s.server, keys))
        typer.echo(f"mnemoray ui: store {s.store}")
        typer.echo(
            f"mnemoray ui: open {page_url(host, port)}"
            + (
                "  (no API keys: open, 127.0.0.1 clients only)"
                if keys.open
                else f"  ({len(keys.digests)} API key(s): the page asks for one)"
            )
        )
        uvicorn.run(
            api,
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            # Slow or piled-up clients are cut off (mnemoray.http.connection_guard).
            http=guarded_protocol(connection_limits(s.server)),
            ws="none",  # no route upgrades; an upgraded connection would leave the guard
        )
    finally:
        backend.close()


__all__ = ["DEFAULT_PORT", "page_url", "ui_cmd"]
