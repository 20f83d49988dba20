"""`mnemoray mcp`: the Model Context Protocol server over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from mnemoray.mcp.backend import Backend

API_KEY_ENV = "MNEMORAY_API_KEY"


def mcp_cmd(
    app_name: str = typer.Option(
        ...,
        "--app",
        help="The app whose memories this server serves (fixed for the server's life).",
    ),
    user_id: str = typer.Option(
        ...,
        "--user",
        help="The user whose memories this server serves (fixed: no tool can name another user).",
    ),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="The agent this server recalls "
        "as (fixed): it also sees that agent's agent-only "
        "memories, and `remember` with agent_only stores them.",
    ),
    store: str | None = typer.Option(
        None,
        "--store",
        help="Memory store directory (or "
        "parquet://DIR, lancedb://DIR), served in this process "
        "(no Ray; created on first write). Sessions for "
        "compile_context: STORE/sessions.db.",
    ),
    url: str | None = typer.Option(
        None,
        "--url",
        help="A running `mnemoray serve` to use instead of --store, e.g. http://127.0.0.1:8000.",
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar=API_KEY_ENV, show_envvar=True, help="API key for --url."
    ),
    embedder: str = typer.Option(
        "default",
        "--embedder",
        help="With --store: 'default' "
        "(the store's model), a model path or hub name, or 'none' "
        "(keyword-only).",
    ),
    summarizer: str = typer.Option(
        "extractive",
        "--summarizer",
        help="With --store: the summarizer that distills sessions given to `remember`.",
    ),
    http: bool = typer.Option(
        False, "--http", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio."
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="With --http: interface to bind (loopback unless --allow-remote).",
    ),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="With --http: port."),
    allow_erase: bool = typer.Option(
        False,
        "--allow-erase",
        help="Offer the tool forget_everything (erase every session, artifact, memory and "
        "job of the user, confirmed in two calls). Off: an erasure cannot be undone.",
    ),
    allow_remote: bool = typer.Option(
        False,
        "--allow-remote",
        help="With --http: allow a "
        "non-loopback --host. The MCP endpoint has no "
        "authentication of its own: put it behind one.",
    ),
) -> None:
    """Serve one user's memories over the Model Context Protocol: tools recall, remember,
    forget, compile_context (and forget_everything with --allow-erase); resources for the
    user's memories and profile.

    The app and user are fixed here, not tool arguments, so a model (or text it read)
    cannot reach another user's memories.
    """
    from mnemoray.http.auth import is_loopback
    from mnemoray.mcp import RemoteBackend, Tenant, build_server

    if (store is None) == (url is None):
        raise typer.BadParameter(
            "pass exactly one of --store (a local store) or --url (a running mnemoray serve)",
            param_hint="--store / --url",
        )
    if url is None and api_key:
        raise typer.BadParameter("only with --url", param_hint="--api-key")
    if url is not None and not url.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{url!r} is not an http(s) URL", param_hint="--url")
    if http and not allow_remote and not is_loopback(host):
        raise typer.BadParameter(
            f"{host!r} is not a loopback address; the MCP endpoint has "
            "no authentication of its own (pass --allow-remote behind "
            "one)",
            param_hint="--host",
        )
    try:
        tenant = Tenant(app_name, user_id, agent)
    except ValueError as exc:
        hint = {"app_name": "--app", "agent_name": "--agent"}.get(
            getattr(exc, "field", None) or "", "--user"
        )
        raise typer.BadParameter(str(exc), param_hint=hint) from exc
    # stdout is the stdio transport: whatever a model loader prints goes to stderr.
    backend: Backend
    with contextlib.redirect_stdout(sys.stderr):
        if store is not None:
            from mnemoray.mcp.local import LocalBackend

            backend = LocalBackend.open(store, None if embedder == "none" else embedder, summarizer)
        else:
            backend = RemoteBackend.open(url or "", api_key)
    server = build_server(backend, tenant, allow_erase=allow_erase)
    try:
        if http:
            typer.echo(
                f"mnemoray MCP for {app_name}/{user_id} ({backend.where}) at "
                f"http://{host}:{port}/mcp",
                err=True,
            )
            server.run("streamable-http", host=host, port=port)
        else:
            server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        backend.close()
