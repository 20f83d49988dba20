"""Offering the compiler's own tools in a step: only those the agent opted into
(``AgentSpec.memory_tools``), with the reason in the step's trace."""

from __future__ import annotations

from typing import Any

from mnemoray.compiler.context import CompileContext


def offer_tool(ctx: CompileContext, tool: dict[str, Any], why: str) -> bool:
    """Declare one of the compiler's tools if the agent opted into it (``AgentSpec.
    memory_tools``); the step's trace says which tools were offered and why, or why not."""
    name = tool["name"]
    if not ctx.agent.offers(name):
        not_offered(ctx, name)
        return False
    ctx.add_tool(tool)
    ctx.detail.setdefault("tools_offered", {})[name] = why
    return True


def not_offered(ctx: CompileContext, name: str) -> None:
    ctx.detail.setdefault("tools_not_offered", {})[name] = "the agent's memory_tools leaves it out"
