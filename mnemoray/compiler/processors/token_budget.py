"""Fits the request into the agent's token budget by dropping old history.

History contents go oldest first, a tool call together with its result.
What always stays: the system instruction (the static prefix above all),
the new message, per-call contents such as inlined artifacts, and any tool
call still waiting for its result. When those alone exceed the budget the
trace says so; compiling never fails on a budget.
"""

from __future__ import annotations

from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.request import Content
from mnemoray.sessions.events import Event


class TokenBudgetProcessor:
    name = "token_budget"

    def process(self, ctx: CompileContext) -> None:
        budget = ctx.agent.token_budget
        if budget is None:
            return
        before = ctx.total_tokens
        ctx.detail.update(budget=budget, tokens_before=before)
        if before <= budget:
            ctx.detail["dropped_contents"] = 0
            return
        groups, pinned = drop_groups(ctx.contents, ctx.session.events)
        drop: list[int] = []
        excess = before - budget
        for group in groups:
            if excess <= 0:
                break
            drop.extend(group)
            excess -= sum(ctx.contents[i].tokens for i in group)
        removed = ctx.remove_contents(drop)
        ctx.detail.update(
            tokens_after=ctx.total_tokens,
            dropped_contents=len(removed),
            dropped_event_ids=[eid for c in removed for eid in c.event_ids],
            budget_met=ctx.total_tokens <= budget,
        )
        if ctx.total_tokens > budget:
            ctx.detail["over_budget_by"] = ctx.total_tokens - budget
            ctx.detail["reason"] = (
                f"what must stay exceeds the budget: system instruction "
                f"({ctx.static_tokens} static-prefix tokens), new message, per-call contents "
                f"and {pinned} content(s) holding unfinished tool calls"
            )


def drop_groups(contents: list[Content], events: list[Event]) -> tuple[list[list[int]], int]:
    """History content indices in droppable groups, oldest first, and the
    number of contents pinned because they hold an unfinished tool call.

    Contents sharing a tool call id form one group. Contents without event ids
    (the new message, per-call inserts) are never in a group.
    """
    call_of: dict[str, str] = {}
    called: set[str] = set()
    answered: set[str] = set()
    for event in events:
        if event.type == "tool_call":
            call_of[event.id] = event.data["call_id"]
            called.add(event.data["call_id"])
        elif event.type == "tool_result" and not event.partial:
            call_of[event.id] = event.data["call_id"]
            answered.add(event.data["call_id"])
    unfinished = called - answered

    groups: list[list[int]] = []
    group_of_call: dict[str, list[int]] = {}
    pinned_calls: set[int] = set()
    for i, content in enumerate(contents):
        if not content.event_ids:
            continue
        call_ids = {call_of[e] for e in content.event_ids if e in call_of}
        group = next((group_of_call[c] for c in call_ids if c in group_of_call), None)
        if group is None:
            group = []
            groups.append(group)
        group.append(i)
        for c in call_ids:
            group_of_call[c] = group
        if call_ids & unfinished:
            pinned_calls.add(id(group))
    kept = [g for g in groups if id(g) not in pinned_calls]
    pinned = sum(len(g) for g in groups if id(g) in pinned_calls)
    return kept, pinned
