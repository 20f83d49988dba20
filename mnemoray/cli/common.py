"""Helpers the command modules share: one-line errors, KEY=VALUE options and
compiled-request output."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import typer

from mnemoray.compiler.request import CompiledRequest, Content
from mnemoray.errors import MnemorayError
from mnemoray.extras import install_hint
from mnemoray.summarizers import available_summarizers

if TYPE_CHECKING:  # the server stack is imported by the commands that run one
    from mnemoray.http.auth import ApiKeys
    from mnemoray.settings.serve import ServeSettings

# The registered summarizer names, so `--summarizer` lists them in help and refuses others
# (typer reads the Literal at run time; a type checker sees the str each name is).
if TYPE_CHECKING:
    SummarizerName = str
else:
    SummarizerName = Literal[tuple(available_summarizers())]

# An error's field (its first part) -> the flag a CLI user sets it with, so a bad value
# is reported under the flag the user typed.
FIELD_FLAGS = {
    "summarizer_options": "--summarizer-option",
    "summarizer": "--summarizer",
    "embedder": "--embedder",
    "shards": "--shards",
    "mode": "--mode",
    "top_k": "--top-k",
    "commit_every": "--commit-every",
    "progress_interval_s": "--progress-every",
    "summarize": "--no-summarize",
}


def error_line(exc: BaseException) -> str:
    """``exc`` as one ``error: ...`` line; a field the CLI sets by a flag is named by
    that flag (``--summarizer-option: ...``); a missing extra names its pip install."""
    hint = install_hint(exc) if isinstance(exc, ModuleNotFoundError) else None
    if hint is not None:
        return f"error: {hint}"
    field = getattr(exc, "field", None) if isinstance(exc, MnemorayError) else None
    if field:
        head, dot, rest = field.partition(".")
        flag = FIELD_FLAGS.get(head)
        if flag is not None:
            where = f"{flag} {rest}" if dot else flag
            return f"error: {where}: {exc.reason}"  # type: ignore[attr-defined]
    return f"error: {exc}"


def one_line_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Any mnemoray error a command lets through ends as one line and exit code 2, never a
    traceback (the CLI's user is the operator: non-public messages are shown too)."""

    @functools.wraps(command)
    def run_command(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MnemorayError as exc:
            typer.echo(error_line(exc), err=True)
            raise typer.Exit(2) from exc
        except ModuleNotFoundError as exc:  # a part of an extra that is not installed
            if install_hint(exc) is None:
                raise
            typer.echo(error_line(exc), err=True)
            raise typer.Exit(2) from exc

    return run_command


def parse_options(pairs: list[str], param_hint: str = "--summarizer-option") -> dict[str, Any]:
    """KEY=VALUE flags as a dict (JSON values parsed); a bad pair is a usage error."""
    from mnemoray.backfill.config import parse_key_values

    try:
        return parse_key_values(pairs, field=param_hint)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=param_hint) from exc


def server_keys(settings: ServeSettings, host: str, server: str) -> ApiKeys:
    """The API keys ``settings`` name (``server.api_keys``) for a server binding ``host``;
    exits 2 with one line when they are malformed, or when there are none and ``host``
    is not loopback: an open ``server`` (``mnemoray serve``, ``mnemoray ui``) binds
    127.0.0.1 only."""
    from mnemoray.http.auth import is_loopback, resolve_keys  # no Ray: auth is plain

    try:
        keys = resolve_keys(settings)
    except MnemorayError as exc:  # AuthConfigError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if keys.open and not is_loopback(host):
        typer.echo(
            "error: --host needs API keys (--api-keys FILE or "
            f"MNEMORAY_SERVER__API_KEYS); without keys {server} binds 127.0.0.1 "
            "only",
            err=True,
        )
        raise typer.Exit(2)
    return keys


def print_request(req: CompiledRequest, naive: int | None = None) -> None:
    typer.echo("--- system_instruction ---")
    typer.echo(req.system_instruction)
    typer.echo(f"--- contents ({len(req.contents)}) ---")
    for content in req.contents:
        typer.echo(f"[{content.role}] {preview(content)}")
    typer.echo(f"--- tools: {', '.join(t['name'] for t in req.tools) or '(none)'}")
    vs_naive = (
        f" (naive append-everything: {naive}, {naive / max(req.total_tokens, 1):.1f}x)"
        if naive is not None
        else ""
    )
    typer.echo(
        f"--- tokens: static prefix {req.static_prefix_tokens}, total "
        f"{req.total_tokens}{vs_naive}; prefix_hash {req.prefix_hash[:16]}"
    )
    typer.echo("--- trace ---")
    typer.echo(f"{'processor':<20}{'tokens+':>9}{'us':>9}  detail")
    for step in req.trace:
        detail = json.dumps(step.detail, default=str)
        typer.echo(f"{step.name:<20}{step.tokens_added:>9}{step.micros:>9}  {detail[:90]}")
    typer.echo("")


def preview(content: Content, width: int = 110) -> str:
    parts = []
    for part in content.parts:
        if part.text is not None:
            parts.append(part.text)
        elif part.function_call is not None:
            call = part.function_call
            parts.append(f"call {call.name}({json.dumps(call.args)})")
        elif part.function_response is not None:
            resp = part.function_response
            parts.append(f"result {resp.name}: {json.dumps(resp.response)}")
    text = " | ".join(parts).replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def table_text(text: str, width: int = 100) -> str:
    """A memory's text as one table cell: its lines joined by " / ", cut to ``width``."""
    flat = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def table_id(value: str, width: int = 16) -> str:
    """An id (user, session) cut to ``width`` for a table column."""
    return value if len(value) <= width else value[: width - 1] + "…"
