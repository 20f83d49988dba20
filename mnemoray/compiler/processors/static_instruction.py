"""The stable prefix: the agent's static instruction, verbatim."""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext, prefix_hash
from mnemoray.compiler.prefix_reuse import PrefixReuse


class StaticInstructionProcessor:
    """Never templated and never joined by anything dynamic, so the prefix
    (and its hash) stays byte-identical across turns and prefix caches hit.

    With a ``reuse`` tracker the trace also says whether the prefix equals the
    previous compile's for the same agent and session (``prefix_reuse``).
    """

    name = "static_instruction"

    def __init__(self, reuse: PrefixReuse | None = None) -> None:
        self.reuse = reuse

    def process(self, ctx: CompileContext) -> None:
        ctx.set_static_instruction(ctx.agent.static_instruction)
        digest = prefix_hash(ctx.static_instruction)
        ctx.detail["prefix_hash"] = digest
        if self.reuse is not None and ctx.callee is None:
            s = ctx.session
            seen = self.reuse.observe((s.app_name, s.user_id, s.session_id, ctx.agent.name), digest)
            if seen is not None:
                ctx.detail["prefix_reuse"] = seen
