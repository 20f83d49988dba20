"""Declarations of the tools the compiler offers on top of the agent's own."""

from __future__ import annotations

from typing import Any

from mnemoray.compiler.degrade import step_error

LOAD_MEMORY = "load_memory"
LOAD_ARTIFACTS = "load_artifacts"
# The tools an agent may name in ``AgentSpec.memory_tools`` (opt-in per agent).
BUILTIN_TOOLS = (LOAD_MEMORY, LOAD_ARTIFACTS)
# How many memories one load_memory call returns when the model gives no ``limit``
# (the service's ``top_k``), and the most it may ask for: more would crowd its context.
DEFAULT_MEMORY_LIMIT = 5
MAX_MEMORY_LIMIT = 20
MAX_MEMORY_BUDGET = 32_000  # tokens one load_memory call may ask for

LOAD_MEMORY_TOOL: dict[str, Any] = {
    "name": LOAD_MEMORY,
    "description": "Search long-term memory of past conversations with this user. "
    "Use it when the answer may depend on something said before.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MEMORY_LIMIT,
                "description": f"How many memories at most (default {DEFAULT_MEMORY_LIMIT}).",
            },
            "budget_tokens": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MEMORY_BUDGET,
                "description": "At most this many tokens of memory text: the best that fit.",
            },
        },
        "required": ["query"],
    },
}

LOAD_ARTIFACTS_TOOL: dict[str, Any] = {
    "name": LOAD_ARTIFACTS,
    "description": "Load the content of artifacts listed as available, for the next step "
    "only. Pass artifact names (or handles).",
    "parameters": {
        "type": "object",
        "properties": {
            "artifact_names": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Names or artifact:// handles to load.",
            },
        },
        "required": ["artifact_names"],
    },
}


def argument_error(field: str, value: Any, most: int) -> dict[str, str] | None:
    """The error result for an integer argument ``field`` the model passed to a tool,
    when ``value`` is not None or an int from 1 to ``most`` (None: it is fine). A
    result, not an exception: the model reads it and can call again."""
    if value is None or (
        isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most
    ):
        return None
    return {"error": f"{field}: must be an integer from 1 to {most}, got {value!r}", "field": field}


def limit_error(limit: Any) -> dict[str, str] | None:
    """The error result for load_memory's ``limit`` (:func:`argument_error`)."""
    return argument_error("limit", limit, MAX_MEMORY_LIMIT)


def budget_error(budget_tokens: Any) -> dict[str, str] | None:
    """The error result for load_memory's ``budget_tokens`` (:func:`argument_error`)."""
    return argument_error("budget_tokens", budget_tokens, MAX_MEMORY_BUDGET)


def unavailable_result(source: str, exc: BaseException) -> dict[str, str]:
    """What a tool answers when its outside source (``"memory"``) failed: a result the
    model can read and work around, where an exception would end its turn. Only the
    public part of ``exc`` is shown (:func:`mnemoray.compiler.degrade.step_error`)."""
    err = step_error(source, exc)
    return {"error": f"{source} is unavailable: {err.error}: {err.message}"}
