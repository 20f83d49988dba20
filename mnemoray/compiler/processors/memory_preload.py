"""Long-term memory: the load_memory tool, and proactive recall when asked.

Recalled memories go into the system instruction after the static prefix,
never into it, so changing recall results never invalidate the prefix cache.
"""

from __future__ import annotations

from datetime import datetime, timezone

from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.services import MemorySnippet
from mnemoray.compiler.tools import LOAD_MEMORY_TOOL
from mnemoray.events import Event

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
        snippets = list(search(session.app_name, session.user_id, query,
                               ctx.agent.preload_top_k))[: ctx.agent.preload_top_k]
        ctx.detail.update(query=query, memory_ids=[s.memory_id for s in snippets])
        if snippets:
            ctx.add_instruction(memory_block(snippets))


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
