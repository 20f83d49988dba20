"""`mnemoray profile` and `mnemoray domain`: a user's profile, an app's domain index.

Call ``MemoryService.profile`` / ``MemoryService.domain``, the rules
``GET /v1/profiles/{app}/{user}`` and ``GET /v1/domains/{app}`` answer by. Exit codes:
1 when there is nothing to show (no memories), 2 for bad input or no store.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import typer

from mnemoray.cli.common import table_text
from mnemoray.cli.store import require_store
from mnemoray.errors import NotFound


def _day(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


def _read(store: str, read: str, *args: str) -> dict:
    from mnemoray.memory.service.service import MemoryService

    require_store(store)
    service = MemoryService.open(store, embedder=None)
    try:
        return getattr(service, read)(*args).to_dict()
    except NotFound as exc:
        typer.echo(f"error: {exc.reason}", err=True)
        raise typer.Exit(1) from exc
    finally:
        service.close()


def profile_cmd(
    store: str = typer.Option(..., "--store", help="Memory store (a directory or URI)."),
    app_name: str = typer.Option(..., "--app", help="App of the user."),
    user_id: str = typer.Option(..., "--user", help="User whose profile to show."),
    as_json: bool = typer.Option(False, "--json", help="Print the profile as JSON."),
) -> None:
    """A user's profile: expertise, communication style, declined topics, activity."""
    p = _read(store, "profile", app_name, user_id)
    if as_json:
        typer.echo(json.dumps(p, ensure_ascii=False))
        return
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(p["memory_kinds"].items()))
    typer.echo(f"{p['app_name']}/{p['user_id']}  store version {p['store_version']}")
    typer.echo(
        f"memories: {p['memories']} ({kinds})  sessions: {p['sessions']}  "
        f"active: {_day(p['first_active'])} .. {_day(p['last_active'])}"
    )
    s = p["style"]
    typer.echo(
        f"style: {s['verbosity']} ({s['words_per_turn']} words/turn over "
        f"{s['turns']} turns), {s['formality']}, questions {s['question_ratio']:.0%}, "
        f"specifics {s['specifics_ratio']:.0%}, follow-ups answered "
        f"{s['follow_ups_answered']}/{s['follow_ups_asked']}"
    )
    typer.echo(f"expertise: {len(p['expertise'])}")
    typer.echo(f"  {'depth':<9} {'sessions':>8} {'mentions':>8}  topic (evidence)")
    for a in p["expertise"]:
        typer.echo(
            f"  {a['depth']:<9} {a['sessions']:>8} {a['mentions']:>8}  {a['topic']} "
            f"({', '.join(a['evidence'][:3])})"
        )
    if p["declined"]:
        typer.echo("declined:")
        for d in p["declined"]:
            typer.echo(
                f"  {d['topic']}  [{d['day']}, session {d['session_id']}] "
                f"{table_text(d['said'], 60)}"
            )
    if p["entities"]:
        typer.echo(
            "mentions: "
            + ", ".join(f"{e['name']} ({e['type']}, {e['memories']})" for e in p["entities"])
        )


def domain_cmd(
    store: str = typer.Option(..., "--store", help="Memory store (a directory or URI)."),
    app_name: str = typer.Option(..., "--app", help="App whose domain index to show."),
    as_json: bool = typer.Option(False, "--json", help="Print the index as JSON."),
) -> None:
    """An app's domain index: coverage per topic and per month, across its users."""
    d = _read(store, "domain", app_name)
    if as_json:
        typer.echo(json.dumps(d, ensure_ascii=False))
        return
    typer.echo(
        f"{d['app_name']}  store version {d['store_version']}  users: {d['users']}  "
        f"sessions: {d['sessions']}  memories: {d['memories']}"
    )
    typer.echo("well covered: " + (", ".join(d["well_covered"]) or "-"))
    typer.echo("weakly covered: " + (", ".join(d["weakly_covered"]) or "-"))
    typer.echo(
        "cross-cutting: "
        + (", ".join(f"{c['topic']} ({c['users']} users)" for c in d["cross_cutting"]) or "-")
    )
    typer.echo(f"  {'users':>5} {'sessions':>8} {'mentions':>8}  {'months':<17} topic")
    for t in d["topics"][:20]:
        typer.echo(
            f"  {t['users']:>5} {t['sessions']:>8} {t['mentions']:>8}  "
            f"{t['first_month']}..{t['last_month']}  {t['topic']}"
        )
    typer.echo("periods: " + "  ".join(f"{p['period']} {p['memories']}" for p in d["periods"]))
    typer.echo(
        "eras mentioned: "
        + ("  ".join(f"{e['era']} {e['memories']}" for e in d["eras_mentioned"]) or "-")
    )


__all__ = ["domain_cmd", "profile_cmd"]
