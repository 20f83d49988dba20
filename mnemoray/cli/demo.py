"""`mnemoray demo`: the compile demo, then (unless --compile-only) the Ray end-to-end demo."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from mnemoray.cli.common import print_request


def demo(
    workdir: Path | None = typer.Option(
        None, help="Where to keep the demo stores (default: a fresh temporary directory)."
    ),
    turns: int = typer.Option(52, min=4, help="User turns in the generated session."),
    compile_only: bool = typer.Option(
        False, "--compile-only", help="Stop after the compile demo (no Ray)."
    ),
    port: int = typer.Option(8011, help="Port of the demo's Serve app (127.0.0.1)."),
) -> None:
    """The main job on the embedded default: a long session compacted and compiled; then
    a generated archive backfilled on Ray Data, served by Ray Serve, recalled and
    compiled over HTTP."""
    from mnemoray.artifacts.files import FileArtifactStore
    from mnemoray.compiler.demo_session import (
        BOOKING_AGENT,
        TRAVEL_AGENT,
        build_demo_session,
        compile_turn,
        demo_compactor,
        naive_tokens,
    )
    from mnemoray.sessions.sqlite.store import SQLiteSessionStore

    root = workdir or Path(tempfile.mkdtemp(prefix="mnemoray-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    store = SQLiteSessionStore(root / "sessions.db")
    artifacts = FileArtifactStore(root / "artifacts")
    built = build_demo_session(store, artifacts, turns=turns, compactor=demo_compactor())
    session = store.get_session(*built.session.key)
    raw_events = sum(e.type != "compaction" for e in session.events)
    message = "Which of my flights so far was the cheapest, and does it suit my knee?"
    typer.echo(
        f"store: {root}\nsession {session.session_id}: {raw_events} raw events, "
        f"{turns} invocations, {built.compactions} compaction events (raw events kept)\n"
    )
    for agent in (TRAVEL_AGENT, BOOKING_AGENT):
        typer.echo(f"=== compiled for {agent.name} ===")
        print_request(
            compile_turn(session, agent, artifacts, message), naive=naive_tokens(session, message)
        )
    if not compile_only:
        from mnemoray.jobs.demo import run  # Ray is imported only here

        run(root / "e2e", port)
