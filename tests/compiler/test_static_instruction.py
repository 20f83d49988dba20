from __future__ import annotations

import hashlib

from mnemoray.compiler import AgentSpec, Compiler
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message
from mnemoray.tokens import count_tokens

STATIC = "You are a careful assistant. Literal braces stay: {user:name} {not_a_key}."


def agent(**kw) -> AgentSpec:
    return AgentSpec(
        name="helper",
        static_instruction=STATIC,
        instruction="User: {user:name}. Turn {turn?}.",
        **kw,
    )


def test_static_block_leads_verbatim_and_is_hashed(make_session):
    session = make_session(user_message("hi"), state={"user:name": "Dana"})
    req = Compiler.default().compile(session, agent())
    assert req.system_instruction.startswith(STATIC + "\n\n")
    assert "{user:name}" in req.system_instruction.split("\n\n")[0]  # never templated
    assert "User: Dana." in req.system_instruction  # the dynamic instruction is
    assert req.prefix_hash == hashlib.sha256(STATIC.encode()).hexdigest()
    assert req.static_prefix_tokens == count_tokens(STATIC)


def test_prefix_hash_stable_across_consecutive_turns(make_session):
    compiler = Compiler.default()
    session = make_session(state={"user:name": "Dana"})
    hashes = []
    for turn in range(6):
        req = compiler.compile(
            session, agent(), new_message=f"question {turn}", temp_state={"temp:now": turn}
        )
        hashes.append(req.prefix_hash)
        assert req.system_instruction.startswith(STATIC)
        session.apply(user_message(f"question {turn}", state_delta={"turn": turn}))
        call = tool_call("helper", "search", {"q": str(turn)})
        session.apply(call)
        session.apply(tool_result("helper", "search", {"hits": turn}, call.data["call_id"]))
        session.apply(model_message("helper", f"answer {turn}"))
    assert len(set(hashes)) == 1


def test_empty_static_instruction_hashes_empty_prefix(make_session):
    req = Compiler.default().compile(make_session(), AgentSpec(name="a", instruction="Hi."))
    assert req.prefix_hash == hashlib.sha256(b"").hexdigest()
    assert req.static_prefix_tokens == 0
    assert req.system_instruction.endswith("\n\nHi.")  # after the identity
