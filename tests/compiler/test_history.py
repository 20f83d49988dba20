from __future__ import annotations

from mnemoray.compiler import AgentSpec, Compiler, FunctionCall, FunctionResponse
from mnemoray.compiler.casting import RenderCache
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message


def compile_for(session, name="alpha", **kw):
    return Compiler.default().compile(session, AgentSpec(name=name, **kw.pop("agent", {})), **kw)


def test_own_and_user_messages_keep_their_roles(make_session):
    session = make_session(user_message("hi", id="u"), model_message("alpha", "hello", id="m"))
    req = compile_for(session, new_message="and now?")
    assert [(c.role, c.text, c.event_ids) for c in req.contents] == [
        ("user", "hi", ("u",)),
        ("model", "hello", ("m",)),
        ("user", "and now?", ()),
    ]


def test_other_agents_are_recast_as_narrative_with_tool_attribution(make_session):
    session = make_session(
        user_message("find flights"),
        model_message("beta", "Searching now."),
        tool_call("beta", "search", {"to": "Oslo", "from": "Rome"}, call_id="c1"),
        # The result is authored by the tool itself: it is still beta's call.
        tool_result("search", "search", {"flights": 2}, call_id="c1"),
    )
    req = compile_for(session)
    assert [c.role for c in req.contents] == ["user"] * 4
    assert req.contents[1].text == "For context: [beta] said: Searching now."
    assert req.contents[2].text == (
        'For context: [beta] called tool `search` with parameters: {"from": "Rome", "to": "Oslo"}'
    )
    assert req.contents[3].text == (
        'For context: [beta] `search` tool returned result: {"flights": 2}'
    )
    # From beta's own point of view the same events are its turns and calls.
    own = compile_for(session, name="beta")
    assert [c.role for c in own.contents] == ["user", "model", "model", "user"]
    assert own.contents[2].parts[0].function_call == FunctionCall(
        "search", {"to": "Oslo", "from": "Rome"}, "c1"
    )
    assert own.contents[3].parts[0].function_response == FunctionResponse(
        "search", {"flights": 2}, "c1"
    )


def test_partial_control_error_and_empty_events_are_dropped(make_session):
    session = make_session(
        user_message("hi", id="keep1"),
        Event(author="alpha", role="system", type="control", text="transfer", id="ctl"),
        Event(author="alpha", role="model", type="error", text="rate limited", id="err"),
        model_message("alpha", "", id="empty"),
        model_message("alpha", "hello", id="keep2"),
    )
    session.events.append(model_message("alpha", "hel", partial=True, id="part"))
    req = compile_for(session)
    assert [c.event_ids for c in req.contents] == [("keep1",), ("keep2",)]
    step = next(s for s in req.trace if s.name == "history")
    assert step.detail["event_ids"] == ["keep1", "keep2"]
    assert step.detail["skipped"] == {"partial": 1, "control_or_error": 2, "empty": 1}


def test_unfinished_own_tool_call_is_a_function_call(make_session):
    session = make_session(
        user_message("weather?"), tool_call("alpha", "weather", {"city": "Oslo"}, call_id="w1")
    )
    req = compile_for(session)
    assert req.contents[-1].role == "model"
    assert req.contents[-1].parts[0].function_call.id == "w1"


def test_include_contents_none_keeps_only_the_current_turn(make_session):
    session = make_session(
        user_message("old question", id="u1"),
        model_message("alpha", "old answer", id="a1"),
        user_message("plan a trip", id="u2"),
        model_message("root", "Handing over to alpha.", id="r1"),
        tool_call("root", "transfer_to_agent", {"agent": "alpha"}, call_id="t1", id="tc"),
        tool_result("root", "transfer_to_agent", {"ok": True}, call_id="t1", id="tr"),
    )
    req = compile_for(session, new_message="Make it cheap.", agent={"include_contents": "none"})
    assert [c.event_ids for c in req.contents] == [("u2",), ("r1",), ("tc",), ("tr",), ()]
    assert req.contents[1].text.startswith("For context: [root] said:")
    assert req.contents[-1].text == "Make it cheap."


def test_include_contents_none_keeps_a_call_with_its_result(make_session):
    # A long-running call made before the user's latest message.
    session = make_session(
        tool_call("alpha", "export", {}, call_id="x1", id="call"),
        user_message("is it done?", id="u"),
        tool_result("alpha", "export", {"done": True}, call_id="x1", id="result"),
    )
    req = compile_for(session, agent={"include_contents": "none"})
    assert [c.event_ids for c in req.contents] == [("call",), ("u",), ("result",)]


def test_include_contents_none_without_user_message(make_session):
    session = make_session(model_message("alpha", "hello", id="m"))
    req = compile_for(session, new_message="hi", agent={"include_contents": "none"})
    assert [c.text for c in req.contents] == ["hi"]


def test_renderings_are_reused_but_views_differ_per_agent(make_session):
    session = make_session(model_message("beta", "hello"))
    first = compile_for(session).contents[0]
    assert compile_for(session).contents[0] is first  # cached, never re-rendered
    assert compile_for(session, name="beta").contents[0].role == "model"


def test_render_cache_hits_equal_events_and_misses_changed_ones():
    cache = RenderCache(max_entries=3)
    call = tool_call("alpha", "search", {"q": "x"}, call_id="c", id="e1")
    first = cache.render(call, "alpha", "alpha")
    # A fresh copy (as loaded from a store) reuses the rendering.
    assert cache.render(Event.from_dict(call.to_dict()), "alpha", "alpha") is first
    # Same id, different payload or point of view: rendered anew.
    changed = Event.from_dict({**call.to_dict(), "data": {**call.data, "args": {"q": "y"}}})
    assert cache.render(changed, "alpha", "alpha").parts[0].function_call.args == {"q": "y"}
    assert cache.render(call, "beta", "alpha").role == "user"
    assert len(cache) == 2  # the changed event replaced the entry under its key
    for text in ("one", "two"):
        cache.render(model_message("alpha", text), "alpha", "alpha")
    assert len(cache) == 3  # bounded: the oldest entry went


def test_huge_renderings_are_not_cached():
    cache = RenderCache(max_entry_tokens=10)
    cache.render(model_message("alpha", "word " * 11), "alpha", "alpha")
    cache.render(model_message("alpha", "short"), "alpha", "alpha")
    assert len(cache) == 1
