"""Long-term memory: the load_memory tool, and proactive recall when asked.

Recalled memories go into the system instruction after the static prefix,
never into it, so changing recall results never invalidate the prefix cache.

Recall is an enrichment: when the store, the embedder or a shard's replica fails,
the compile goes on without the memory block and the trace names the error (see
:mod:`mnemoray.compiler.degrade` for which failures do, and why).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.degrade import degradable
from mnemoray.compiler.services import MemorySnippet
from mnemoray.compiler.tools import LOAD_MEMORY_TOOL
from mnemoray.events import Event

log = logging.getLogger(__name__)

MEMORY_OPEN = "<memory>"
MEMORY_CLOSE = "</memory>"
MEMORY_HEADER = ("Memories recalled from earlier conversations with this user. "
                 "They may be relevant or out of date; prefer the conversation when they disagree.")


class MemoryPreloadProcessor:
    name = "memory_preload"

    def process(self, ctx: CompileContext) -> None:
        search = ctx.services.memory_search
        if search is None:
            return
        ctx.add_tool(LOAD_MEMORY_TOOL)
        if not ctx.agent.memory_preload:
            return
        query = ctx.new_message or last_user_text(ctx.session.events)
        if not query:
            ctx.detail["skipped"] = "no user text to search with"
            return
        session = ctx.session
        ctx.detail["query"] = query
        try:
            snippets = list(search(session.app_name, session.user_id, query,
                                   ctx.agent.preload_top_k))[: ctx.agent.preload_top_k]
            block = memory_block(snippets) if snippets else ""
        except Exception as exc:
            if not degradable(exc):
                raise
            err = ctx.degrade(exc)
            # The full error (a damaged store's path) is for the operator only.
            log.warning("compile of %s/%s/%s goes on without memories: %s: %s",
                        session.app_name, session.user_id, session.session_id, err.error, exc,
                        exc_info=exc)
            return
        ctx.detail["memory_ids"] = [s.memory_id for s in snippets]
        ctx.add_instruction(block)


def last_user_text(events: list[Event]) -> str:
    for event in reversed(events):
        if event.role == "user" and event.type == "message" and not event.partial and event.text:
            return event.text
    return ""


def memory_block(snippets: list[MemorySnippet]) -> str:
    lines = [MEMORY_OPEN, MEMORY_HEADER]
    for s in snippets:
        when = datetime.fromtimestamp(s.time, tz=timezone.utc).strftime("%Y-%m-%d") \
            if s.time is not None else "date unknown"
        where = f"session {s.session_id}" if s.session_id else "session unknown"
        # A memory must not be able to close the block early.
        text = s.text.replace(MEMORY_CLOSE, "&lt;/memory&gt;")
        lines.append(f"- [{when}, {where}] {text}")
    lines.append(MEMORY_CLOSE)
    return "\n".join(lines)
