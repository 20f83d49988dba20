from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.sessions import (
    InMemorySessionStore,
    model_message,
    tool_call,
    tool_result,
    user_message,
)

store = InMemorySessionStore()
s = store.create_session("shop", "ana", state={"user:name": "Ana", "tier": "gold"})
store.append_event(s, user_message("Where is my order 1234?", invocation_id="i1"))
call = tool_call(
    "support", "order_status", {"order_id": "1234"}, call_id="call-1", invocation_id="i1"
)
store.append_event(s, call)
store.append_event(
    s,
    tool_result(
        "support", "order_status", {"status": "shipped"}, call.data["call_id"], invocation_id="i1"
    ),
)
store.append_event(s, model_message("support", "It shipped yesterday.", invocation_id="i1"))
store.append_event(
    s, model_message("billing", "Your refund of 12 EUR was issued.", invocation_id="i1")
)

agent = AgentSpec(
    name="support",
    description="Answers order questions.",
    static_instruction="You are Acme's support agent. Be brief.",
    instruction="Customer: {user:name} ({tier} tier). Locale: {locale?}",
)
req = Compiler.default().compile(
    s, agent, new_message="And when will it arrive?", services=Services()
)

print(req.system_instruction)
for content in req.contents:
    print(content.role, [part.to_dict() for part in content.parts])
print("tokens:", req.static_prefix_tokens, req.total_tokens, "prefix:", req.prefix_hash[:12])
print("cacheable prefix:", req.trace[-1].detail)  # what a prefix cache can reuse next turn
for step in req.trace:
    print(f"{step.name:<20} {step.tokens_added:>5} {step.micros:>5}us")
