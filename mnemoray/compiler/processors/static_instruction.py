"""The stable prefix: the agent's static instruction, verbatim."""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext, prefix_hash


class StaticInstructionProcessor:
    """Never templated and never joined by anything dynamic, so the prefix
    (and its hash) stays byte-identical across turns and prefix caches hit."""

    name = "static_instruction"

    def process(self, ctx: CompileContext) -> None:
        ctx.set_static_instruction(ctx.agent.static_instruction)
        ctx.detail["prefix_hash"] = prefix_hash(ctx.static_instruction)
