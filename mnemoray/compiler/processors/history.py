"""The contents processor: session events -> conversation contents."""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.history_memo import MEMO


class HistoryProcessor:
    """Selects events (see ``selection``), casts them for this agent (see
    ``casting``) and appends the caller's new message last. What a previous
    compile of the same session derived is reused (see ``history_memo``)."""

    name = "history"

    def process(self, ctx: CompileContext) -> None:
        if ctx.callee is not None:  # agents as tools: the prompt is all the callee sees
            ctx.add_new_message(ctx.callee.prompt)
            ctx.detail.update(
                mode="callee",
                events=0,
                caller_events_hidden=len(ctx.session.events),
                new_message=True,
            )
            return
        view = MEMO.view(ctx.session, ctx.agent.name, ctx.agent.include_contents)
        ctx.extend_history(view.contents, view.tokens)
        if ctx.new_message:
            ctx.add_new_message(ctx.new_message)
        ctx.detail.update(
            events=len(view.event_ids),
            event_ids=list(view.event_ids),
            compactions=list(view.compactions),
            covered_by_compaction=view.covered,
            skipped=dict(view.skipped),
            new_message=bool(ctx.new_message),
        )
        if view.compression_ratio is not None:
            ctx.detail["compression_ratio"] = view.compression_ratio
