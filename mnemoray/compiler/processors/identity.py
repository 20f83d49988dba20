"""Tells the model which agent it is.

Stable per agent, so it comes right after the static instruction, in the cacheable
prefix; not inside the static instruction, whose hash (``prefix_hash``) is the agent's
own text alone and may be shared by agents of other names."""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext


class IdentityProcessor:
    name = "identity"

    def process(self, ctx: CompileContext) -> None:
        text = f'You are an agent. Your internal name is "{ctx.agent.name}".'
        if ctx.agent.description:
            text += f' The description about you is "{ctx.agent.description}".'
        ctx.add_instruction(text)
