"""`mnemoray serve`: the HTTP API on a local Ray instance."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import typer

from mnemoray.cli.common import parse_options, server_keys

Ingress = Literal["direct", "proxy"]


def serve_cmd(
    config: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        help="Settings file (YAML/JSON, the grouped layout of "
        "mnemoray.settings.serve; also $MNEMORAY_CONFIG).",
    ),
    store: str | None = typer.Option(
        None,
        "--store",
        help="Memory store directory, or "
        "parquet://DIR / lancedb://DIR (created on first write); "
        "sessions.db and artifacts/ live in it too. Setting: "
        "store.",
    ),
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help="HTTP port (default 8000). Setting: server.port."
    ),
    host: str | None = typer.Option(
        None,
        "--host",
        help="Interface to bind. Only with API "
        "keys; without keys the server binds 127.0.0.1. "
        "Setting: server.host.",
    ),
    replicas: int | None = typer.Option(
        None, "--replicas", min=1, help="Ingress replicas (default 1). Setting: server.replicas."
    ),
    api_keys: Path | None = typer.Option(
        None,
        "--api-keys",
        exists=True,
        dir_okay=False,
        help='JSON file {"<key>": "app" or ["app", ...]}. Setting: server.api_keys.',
    ),
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        help="'default' (the store's model, MiniLM for a new "
        "store), 'onnx', a local model path or hub name, or "
        "'none'. Setting: models.embedder.",
    ),
    settings: list[str] = typer.Option(
        [],
        "--set",
        help="Any other setting as KEY=VALUE "
        "(repeatable; JSON values, dotted keys: --set "
        "ingestion.trigger.type=inactivity, --set "
        "recall.apps.myapp.mode=dense).",
    ),
    ingress: Ingress | None = typer.Option(
        None,
        "--ingress",
        help="direct (default): the ingress replicas answer HTTP on "
        "HOST:PORT themselves (one node; replicas share the port). proxy: Ray Serve's HTTP "
        "proxy answers there and routes to the replicas (clusters behind a load balancer; "
        "docs/operations.md). Setting: server.ingress.",
    ),
    direct_ingress: bool = typer.Option(
        False,
        "--direct-ingress",
        hidden=True,
        help="Deprecated: direct ingress is the default (--ingress direct).",
    ),
) -> None:
    """Serve the HTTP API (recall, memories, sessions, compile, artifacts) on a local Ray
    instance; blocks until Ctrl-C. OpenAPI docs at /docs (with API keys only if
    server.docs is true).

    Settings: flags > MNEMORAY_<GROUP>__<FIELD> environment > --config file > defaults.
    """
    # mnemoray.settings.serve imports no Ray: the settings are known before Ray loads.
    from mnemoray.errors import MnemorayError
    from mnemoray.ray_local import local_ray_options
    from mnemoray.settings.serve import load_settings

    try:
        flags = parse_options(settings)
    except typer.BadParameter as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    given = {
        "config": config,
        "store": store,
        "server.port": port,
        "server.host": host,
        "server.replicas": replicas,
        "server.api_keys": api_keys,
        "models.embedder": embedder,
        "server.ingress": ingress,
    }
    if direct_ingress:
        if ingress == "proxy":
            raise typer.BadParameter("contradicts --ingress proxy", param_hint="--direct-ingress")
        typer.echo(
            "note: --direct-ingress is the default now (--ingress direct); the "
            "replicas answer on --port itself",
            err=True,
        )
        given["server.ingress"] = "direct"
    for key, value in given.items():
        if value is not None:
            flags[key] = str(value) if isinstance(value, Path) else value
    try:
        s = load_settings(flags)
    except MnemorayError as exc:  # ConfigError (a setting), AuthConfigError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    server = s.server
    # A new local Ray listens on 127.0.0.1 only; Ray reads this when it is imported.
    os.environ.update(local_ray_options(None)[1])
    # serve/ wraps Ray; imported here so the rest of the CLI never loads Ray.
    from mnemoray.serve.app import run_local

    keys = server_keys(s, server.host, "the server")
    docs_open = keys.open if server.docs is None else server.docs
    typer.echo(
        f"mnemoray: serving store {s.store} on http://{server.host}:{server.port} "
        + ("(docs: /docs)" if docs_open else "(docs off; setting server.docs)")
    )
    typer.echo(
        f"mnemoray: ingress {server.ingress}: "
        + (
            f"{server.replicas} replica(s) answer on this port themselves"
            if server.ingress == "direct"
            else "Ray Serve's HTTP proxy answers on this port"
        )
    )
    if keys.open:
        typer.echo("mnemoray: no API keys configured: the API is OPEN, bound to 127.0.0.1 only")
    else:
        typer.echo(f"mnemoray: {len(keys.digests)} API key(s); every route but /healthz needs one")
    run_local(s)
