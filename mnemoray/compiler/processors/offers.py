"""Offering the compiler's own tools in a step: only those the agent opted into
(``AgentSpec.memory_tools``, none by default), with the reason in the step's trace."""

from __future__ import annotations

from typing import Any

from mnemoray.compiler.context import CompileContext

NOT_OPTED_IN = "the agent did not opt in through memory_tools"


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


def not_offered(ctx: CompileContext, name: str, why: str = NOT_OPTED_IN) -> None:
    ctx.detail.setdefault("tools_not_offered", {})[name] = why


def unavailable(ctx: CompileContext, name: str, why: str) -> None:
    """A tool the agent opted into that this compile cannot offer (``why``: its service
    is missing); an agent that did not opt in is not told about it."""
    if ctx.agent.offers(name):
        not_offered(ctx, name, why)
