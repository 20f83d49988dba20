"""MCP errors of one line: mnemoray's errors and rejected arguments as tool errors.

A tool error is read by a model: it gets the message a caller can act on
(``top_k: Input should be ...``), never a traceback; a failure that is not the
caller's (a damaged store) is logged here in full and named in one short line.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from mnemoray.errors import MnemorayError

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def _message(exc: MnemorayError) -> str:
    if exc.public:
        return " ".join(str(exc).split())  # one line, whatever the message held
    # A damaged store or a bug: the operator reads the log, the model a short line.
    log.error("mnemoray MCP: %s: %s", type(exc).__name__, exc, exc_info=exc)
    return f"{type(exc).__name__}: the memory store failed; see the MCP server's log"


def tool_errors(fn: F) -> F:
    """mnemoray's errors as MCP tool errors of one line (the SDK adds the tool's name)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MnemorayError as exc:
            raise ToolError(_message(exc)) from exc

    return run  # type: ignore[return-value]


def resource_errors(fn: F) -> F:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MnemorayError as exc:
            raise ResourceError(_message(exc)) from exc

    return run  # type: ignore[return-value]


def validation_line(exc: ValidationError) -> str:
    """The first problem of a rejected argument set, as ``field: message`` on one line."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "arguments"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


class MnemorayMCP(MCPServer):
    """The SDK's server, with argument validation errors of one line."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # pydantic's text spans many lines
                raise ToolError(f"Error executing tool {name}: {validation_line(cause)}") from cause
            raise
