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
        if ctx.callee is not None:  # agents as tools: the prompt is all the callee sees
            ctx.add_new_message(ctx.callee.prompt)
            ctx.detail.update(mode="callee", events=0,
                              caller_events_hidden=len(ctx.session.events), new_message=True)
            return
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
        # Raw tokens the shown summaries replace, per summary token (where compactions
        # recorded both: mnemoray.compaction).
        used = [e.data for e in selection.events if e.type == "compaction"]
        raw = sum(d.get("raw_tokens", 0) for d in used)
        summary = sum(d.get("summary_tokens", 0) for d in used)
        if raw and summary:
            ctx.detail["compression_ratio"] = round(raw / summary, 2)
