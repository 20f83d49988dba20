"""Old tool results leave the compiled history; their calls stay.

A tool result matters to the invocation that asked for it; later it is mostly
weight (ADK's "active tool results, removed after processing"). With the agent's
``tool_result_window`` set to N, a result from an invocation older than the last
N is shown as a one-line summary (and the artifact to load, if it was
offloaded) in place of its payload. The call stays as it was and the result keeps
its place and call id, so model APIs still see every call answered. The session
is never changed: a larger window shows the full results again.

An invocation starts at each user message, or where the events' non-empty
``invocation_id`` changes. A compile with a new message starts a new invocation,
so with N = 1 it shows only the results of the invocation it answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mnemoray.artifacts.offload import OFFLOADED_KEY
from mnemoray.compiler.casting import render, to_json
from mnemoray.compiler.context import CompileContext
from mnemoray.sessions.events import Event

SUMMARY_CHARS = 120


class ToolResultsProcessor:
    name = "tool_results"

    def process(self, ctx: CompileContext) -> None:
        window = ctx.agent.tool_result_window
        if window is None or ctx.callee is not None:
            return
        events = ctx.session.events
        invocation = invocation_index(events)
        current = max(invocation.values(), default=0) + (1 if ctx.new_message else 0)
        old = {
            e.id: e
            for e in events
            if e.type == "tool_result" and current - invocation.get(e.id, 0) >= window
        }
        ctx.detail["window"] = window
        if not old:
            ctx.detail["dropped_results"] = 0
            return
        owner = {e.data["call_id"]: e.author for e in events if e.type == "tool_call"}
        agent_name = ctx.agent.name
        dropped: list[str] = []
        for i, content in enumerate(ctx.contents):
            if len(content.event_ids) != 1 or content.event_ids[0] not in old:
                continue
            event = old[content.event_ids[0]]
            short = replace(event, data={**event.data, "response": summary(event)})
            ctx.replace_content(
                i, render(short, agent_name, owner.get(event.data["call_id"], event.author))
            )
            dropped.append(event.id)
        ctx.detail.update(dropped_results=len(dropped), dropped_event_ids=dropped)


def invocation_index(events: list[Event]) -> dict[str, int]:
    """Event id -> the number of the invocation it belongs to (0, 1, ...)."""
    index, current_id = 0, ""
    out: dict[str, int] = {}
    for event in events:
        if event.partial:
            continue
        if event.role == "user" and event.type == "message":
            index += 1
            current_id = event.invocation_id
        elif event.invocation_id and event.invocation_id != current_id:
            if current_id:  # a new invocation id; the first one after a user message joins it
                index += 1
            current_id = event.invocation_id
        out[event.id] = index
    return out


def summary(event: Event) -> dict[str, Any]:
    """The one line that stands for the result of ``event``."""
    response = event.data.get("response")
    if isinstance(response, dict) and response.get(OFFLOADED_KEY):
        return {
            "summary": str(response.get("summary", ""))[: SUMMARY_CHARS * 2],
            "artifact": response.get("artifact"),
            "note": "result of an earlier invocation; load_artifacts shows it",
        }
    text = response if isinstance(response, str) else to_json(response)
    head = " ".join(text[: SUMMARY_CHARS * 2].split())
    line = head if len(head) <= SUMMARY_CHARS else head[: SUMMARY_CHARS - 1] + "…"
    return {
        "summary": f"{len(text.encode('utf-8'))} bytes: {line}",
        "note": "result of an earlier invocation, left out of the history",
    }
