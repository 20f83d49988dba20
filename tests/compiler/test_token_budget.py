from __future__ import annotations

from mnemoray.compiler import AgentSpec, Compiler
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message

LONG = "word " * 50  # 50 tokens


def budget_step(req):
    return next(s for s in req.trace if s.name == "token_budget")


def compile_with_budget(session, budget, **kw):
    agent = AgentSpec(name="alpha", static_instruction="Be brief.", token_budget=budget)
    return Compiler.default().compile(session, agent, **kw)


def test_under_budget_nothing_is_dropped(make_session):
    session = make_session(user_message("hi", id="u"))
    req = compile_with_budget(session, 10_000)
    assert [c.event_ids for c in req.contents] == [("u",)]
    assert budget_step(req).detail["dropped_contents"] == 0


def test_drops_oldest_history_first_and_keeps_the_new_message(make_session):
    session = make_session(*[user_message(LONG, id=f"u{i}") for i in range(5)])
    unbounded = compile_with_budget(session, None, new_message=LONG)
    budget = unbounded.total_tokens - 120  # needs three 50-token contents gone
    req = compile_with_budget(session, budget, new_message=LONG)
    assert [c.event_ids for c in req.contents] == [("u3",), ("u4",), ()]
    assert req.total_tokens <= budget
    detail = budget_step(req).detail
    assert detail["dropped_event_ids"] == ["u0", "u1", "u2"]
    assert detail["dropped_contents"] == 3
    assert detail["budget_met"] is True
    assert budget_step(req).tokens_added == req.total_tokens - unbounded.total_tokens


def test_a_tool_call_and_its_result_are_dropped_together(make_session):
    session = make_session(
        tool_call("alpha", "search", {"q": LONG}, call_id="c1", id="call"),
        user_message(LONG, id="between"),
        tool_result("alpha", "search", {"hits": "x"}, call_id="c1", id="result"),
        user_message(LONG, id="last"),
    )
    total = compile_with_budget(session, None).total_tokens
    req = compile_with_budget(session, total - 10)  # dropping the call alone would do
    assert budget_step(req).detail["dropped_event_ids"] == ["call", "result"]
    assert [c.event_ids for c in req.contents] == [("between",), ("last",)]


def test_never_drops_an_unfinished_tool_call(make_session):
    session = make_session(
        tool_call("alpha", "slow_job", {"spec": LONG}, call_id="pending", id="call"),
        user_message(LONG, id="u1"),
        user_message(LONG, id="u2"),
    )
    req = compile_with_budget(session, 5, new_message="status?")
    assert [c.event_ids for c in req.contents] == [("call",), ()]
    detail = budget_step(req).detail
    assert detail["dropped_event_ids"] == ["u1", "u2"]
    assert detail["budget_met"] is False
    assert detail["over_budget_by"] == req.total_tokens - 5
    assert "unfinished tool calls" in detail["reason"]


def test_the_static_prefix_is_never_touched(make_session):
    agent = AgentSpec(name="alpha", static_instruction=LONG, token_budget=10)
    req = Compiler.default().compile(make_session(user_message("hi")), agent)
    assert req.system_instruction.startswith(LONG)
    assert req.contents == []
    assert budget_step(req).detail["budget_met"] is False


def test_only_as_much_as_needed_is_dropped(make_session):
    session = make_session(user_message(LONG, id="u0"), model_message("alpha", "ok", id="m"))
    req = compile_with_budget(session, compile_with_budget(session, None).total_tokens - 1)
    assert [c.event_ids for c in req.contents] == [("m",)]
