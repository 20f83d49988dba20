"""Declarations of the tools the compiler offers on top of the agent's own."""

from __future__ import annotations

from typing import Any

from mnemoray.compiler.degrade import step_error

LOAD_MEMORY = "load_memory"
LOAD_ARTIFACTS = "load_artifacts"

LOAD_MEMORY_TOOL: dict[str, Any] = {
    "name": LOAD_MEMORY,
    "description": "Search long-term memory of past conversations with this user. "
                   "Use it when the answer may depend on something said before.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
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


def unavailable_result(source: str, exc: BaseException) -> dict[str, str]:
    """What a tool answers when its outside source (``"memory"``) failed: a result the
    model can read and work around, where an exception would end its turn. Only the
    public part of ``exc`` is shown (:func:`mnemoray.compiler.degrade.step_error`)."""
    err = step_error(source, exc)
    return {"error": f"{source} is unavailable: {err.error}: {err.message}"}
