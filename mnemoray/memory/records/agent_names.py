"""The agent-name rule of memory scopes (numpy-free: the HTTP schemas import it)."""

from __future__ import annotations

import re
from typing import Any

from mnemoray.errors import InvalidInput

# A name that may own agent-only memories: ADK's identifiers, plus '-' and '.'.
AGENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")


def check_agent_name(
    value: Any, error: type[InvalidInput] = InvalidInput, field: str = "agent_name"
) -> str:
    """``value`` if it is "" (shared) or a valid agent name, else ``error`` naming ``field``."""
    if not isinstance(value, str):
        raise error(f"expected a string, got {type(value).__name__}", field=field)
    if value and not AGENT_NAME.fullmatch(value):
        raise error(
            f"{value[:40]!r} is not an agent name (a letter or '_', then up to "
            f"127 letters, digits, '_', '.', '-')",
            field=field,
        )
    return value


def agent_view(name: Any) -> str | None:
    """The view of an agent named ``name`` (a compiled AgentSpec's): itself when the name
    could own agent-only memories, else None (it sees the shared ones; a name that
    cannot own any memory must not make the compile fail)."""
    return name if isinstance(name, str) and AGENT_NAME.fullmatch(name) else None


def memory_view(agent_name: Any, memory_agent: str | None = None) -> str | None:
    """Whose memories a compile's preload recalls: ``memory_agent`` when given ("": the
    shared ones only; a server that pins its agent, like ``mnemoray mcp``, passes it),
    else the compiled agent's own view."""
    if memory_agent is not None:
        return check_agent_name(memory_agent) or None
    return agent_view(agent_name)


__all__ = ["AGENT_NAME", "agent_view", "check_agent_name", "memory_view"]
