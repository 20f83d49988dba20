"""Tells the model which agent it is (after the prefix: names are dynamic)."""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext


class IdentityProcessor:
    name = "identity"

    def process(self, ctx: CompileContext) -> None:
        text = f'You are an agent. Your internal name is "{ctx.agent.name}".'
        if ctx.agent.description:
            text += f' The description about you is "{ctx.agent.description}".'
        ctx.add_instruction(text)
