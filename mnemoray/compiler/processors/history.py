"""The contents processor: session events -> conversation contents."""

from __future__ import annotations

from mnemoray.compiler.casting import CACHE
from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.selection import select


class HistoryProcessor:
    """Selects events (see ``selection``), casts them for this agent (see
    ``casting``) and appends the caller's new message last."""

    name = "history"

    def process(self, ctx: CompileContext) -> None:
        selection = select(ctx.session.events, ctx.agent.include_contents)
        agent_name = ctx.agent.name
        owner = selection.call_owner
        render = CACHE.render
        ctx.extend_contents(
            render(e, agent_name, owner.get(e.data["call_id"], e.author)
                   if e.type == "tool_result" else e.author)
            for e in selection.events)
        if ctx.new_message:
            ctx.add_new_message(ctx.new_message)
        ctx.detail.update(
            events=len(selection.events),
            event_ids=[e.id for e in selection.events],
            compactions=selection.compactions_used,
            covered_by_compaction=selection.covered,
            skipped={k: v for k, v in selection.skipped.items() if v},
            new_message=bool(ctx.new_message),
        )
