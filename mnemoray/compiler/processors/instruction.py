"""The agent's dynamic instruction, rendered against state and artifacts."""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.template import ArtifactReader, render_template


class InstructionProcessor:
    name = "instruction"

    def process(self, ctx: CompileContext) -> None:
        text = render_template(ctx.agent.instruction, ctx.state, _artifact_reader(ctx))
        ctx.add_instruction(text)
        ctx.detail["chars"] = len(text)


def _artifact_reader(ctx: CompileContext) -> ArtifactReader | None:
    store = ctx.services.artifacts
    if store is None:
        return None
    session = ctx.session
    # A callee reads only the artifacts it was handed, in its template too.
    given = None if ctx.callee is None else set(ctx.callee.artifacts)

    def read(name: str) -> str:
        if given is not None and name not in given:
            raise KeyError(name)
        return store.load(session.app_name, session.user_id, session.session_id, name).text()

    return read
