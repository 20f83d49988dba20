from __future__ import annotations

from mnemoray.compiler import AgentSpec, Compiler


def test_identity_names_the_agent_and_its_description(make_session):
    req = Compiler.default().compile(
        make_session(), AgentSpec(name="billing", description="Handles refunds.")
    )
    assert (
        'You are an agent. Your internal name is "billing". '
        'The description about you is "Handles refunds.".'
    ) in req.system_instruction


def test_identity_without_description(make_session):
    req = Compiler.default().compile(make_session(), AgentSpec(name="billing"))
    assert req.system_instruction == 'You are an agent. Your internal name is "billing".'
    step = next(s for s in req.trace if s.name == "identity")
    assert step.tokens_added == req.total_tokens
