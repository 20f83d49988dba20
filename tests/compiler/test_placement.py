"""Placement of recalled memories: in the system instruction, or just
before the new message; the trace, ``system_hash`` and ``cacheable_prefix_tokens`` show
the effect on the cacheable prefix. Also the static-prefix reuse rate and the context
tokens per request, in the trace and in /metrics."""

from __future__ import annotations

from typing import Any

import pytest

from mnemoray.compiler import AgentSpec, Compiler, MemorySnippet, Services
from mnemoray.compiler.processors.memory_preload import MEMORY_OPEN
from mnemoray.memory.records.record import Memory
from mnemoray.schemas.compile import AgentIn
from mnemoray.sessions.events import model_message, user_message
from mnemoray.tokens import count_tokens

HISTORY = [
    user_message("I grow tulips on my balcony."),
    model_message("bot", "Tulips like cool nights and sun."),
    user_message("And what about roses?"),
    model_message("bot", "Roses need more water."),
]


def search_returning(*texts: str) -> Any:
    def search(app_name: str, user_id: str, query: str, top_k: int) -> list[MemorySnippet]:
        return [MemorySnippet(f"m{i}", t, 1.0 - i / 10) for i, t in enumerate(texts)]

    return search


def agent(placement: str | None) -> AgentSpec:
    """``placement`` None: the default."""
    return AgentSpec(
        name="bot",
        static_instruction="You are a gardening assistant.",
        instruction="Be brief.",
        memory_preload=True,
        **({} if placement is None else {"memory_placement": placement}),
    )


def compile_with(
    make_session: Any,
    placement: str,
    *memories: str,
    new_message: str | None = "water them how often?",
) -> Any:
    return Compiler.default().compile(
        make_session(*HISTORY),
        agent(placement),
        new_message,
        Services(memory_search=search_returning(*memories)),
    )


def test_before_message_puts_memories_last_and_keeps_the_system_instruction(make_session):
    first = compile_with(make_session, "before_message", "Ana has a balcony garden.")
    second = compile_with(make_session, "before_message", "Ana waters on Sundays.")
    for req, text in ((first, "balcony garden"), (second, "Sundays")):
        assert MEMORY_OPEN not in req.system_instruction
        memory, new = req.contents[-2], req.contents[-1]
        assert new.text == "water them how often?"
        assert memory.role == "user" and memory.text.startswith(MEMORY_OPEN)
        assert text in memory.text and memory.event_ids == ()
        step = next(s for s in req.trace if s.name == "memory_preload")
        assert step.detail["placement"] == "before_message"
        assert step.detail["content_index"] == len(req.contents) - 2
        # The block only: preloading brings no load_memory declaration (opt-in).
        assert step.tokens_added == memory.tokens and req.tools == []
    # Different recall results, byte-identical system instruction and history.
    assert first.system_hash == second.system_hash
    assert first.system_instruction == second.system_instruction
    assert [c.to_dict() for c in first.contents[:-2]] == [c.to_dict() for c in second.contents[:-2]]
    assert first.cacheable_prefix_tokens == second.cacheable_prefix_tokens
    assert first.total_tokens == sum(s.tokens_added for s in first.trace)


def test_the_default_layout_keeps_the_system_hash_and_the_trace_shows_the_prefix(make_session):
    """Two turns of one session recalling different memories: by default the system
    instruction stays byte-identical and a prefix cache reuses it and the history; with
    the memories in the system instruction its hash changes and the prefix stops there."""
    session = make_session(*HISTORY)
    compiler = Compiler.default()

    def compiled(placement: str | None, memory: str) -> Any:
        search = search_returning(memory)
        return compiler.compile(session, agent(placement), "water them?", Services(search))

    first = compiled(None, "Ana has a balcony garden.")
    second = compiled(None, "Ana waters on Sundays.")
    assert first.system_hash == second.system_hash
    for req in (first, second):
        summary = req.trace[-1]
        assert (summary.name, summary.tokens_added) == ("cacheable_prefix", 0)
        # static instruction, identity, instruction; then the history, up to the memories.
        assert summary.detail == {
            "tokens": req.cacheable_prefix_tokens,
            "system_blocks": 3,
            "contents": len(HISTORY),
            "ends_before": {"step": "memory_preload", "part": "content", "index": len(HISTORY)},
        }
        history = req.contents[: len(HISTORY)]
        assert all(c.event_ids for c in history) and MEMORY_OPEN in req.contents[-2].text
        assert req.cacheable_prefix_tokens == count_tokens(req.system_instruction) + sum(
            c.tokens for c in history
        )
    in_system = [compiled("system", m) for m in ("Ana has a balcony garden.", "Ana waters.")]
    assert in_system[0].system_hash != in_system[1].system_hash
    for req in in_system:
        assert req.trace[-1].detail == {
            "tokens": req.cacheable_prefix_tokens,
            "system_blocks": 3,
            "contents": 0,
            "ends_before": {"step": "memory_preload", "part": "system_block", "index": 3},
        }
        blocks = req.system_instruction.split("\n\n")
        assert blocks[3].startswith(MEMORY_OPEN)
        assert req.cacheable_prefix_tokens == count_tokens("\n\n".join(blocks[:3]))


def test_the_trace_names_what_ends_the_prefix_when_nothing_is_recalled(make_session):
    session = make_session(*HISTORY)
    plain = AgentSpec(name="bot", static_instruction="You are a gardening assistant.")
    asked = Compiler.default().compile(session, plain, "water them how often?")
    assert asked.trace[-1].detail["ends_before"] == {
        "step": "history",
        "part": "new_message",
        "index": len(HISTORY),
    }
    # No new message and nothing recalled: the whole request is a reusable prefix.
    replayed = Compiler.default().compile(session, plain)
    assert replayed.trace[-1].detail == {
        "tokens": replayed.total_tokens,
        "system_blocks": 2,
        "contents": len(HISTORY),
        "ends_before": None,
    }
    assert replayed.cacheable_prefix_tokens == replayed.total_tokens


def test_system_placement_changes_the_system_instruction_and_shortens_the_prefix(make_session):
    first = compile_with(make_session, "system", "Ana has a balcony garden.")
    second = compile_with(make_session, "system", "Ana waters on Sundays.")
    assert MEMORY_OPEN in first.system_instruction and "Sundays" in second.system_instruction
    assert first.system_hash != second.system_hash
    # The static prefix is untouched either way.
    at_end = compile_with(make_session, "before_message", "Ana has a balcony garden.")
    assert first.prefix_hash == second.prefix_hash == at_end.prefix_hash
    assert first.static_prefix_tokens == at_end.static_prefix_tokens
    # In the system instruction the memories end the cacheable prefix before the history;
    # before the message, the whole system instruction and the history are the prefix.
    history_tokens = sum(c.tokens for c in at_end.contents[:-2])
    memory_tokens = at_end.contents[-2].tokens
    assert at_end.cacheable_prefix_tokens == (
        at_end.total_tokens - memory_tokens - at_end.contents[-1].tokens
    )
    assert first.cacheable_prefix_tokens < at_end.cacheable_prefix_tokens
    assert first.cacheable_prefix_tokens == (
        first.total_tokens - history_tokens - memory_tokens - first.contents[-1].tokens
    )
    step = next(s for s in first.trace if s.name == "memory_preload")
    assert step.detail["placement"] == "system"


def test_without_a_new_message_memories_go_before_the_last_user_message(make_session):
    req = compile_with(make_session, "before_message", "Ana likes red roses.", new_message=None)
    texts = [c.text for c in req.contents]
    at = texts.index("And what about roses?")
    assert texts[at - 1].startswith(MEMORY_OPEN) and "red roses" in texts[at - 1]
    assert len(texts) == len(HISTORY) + 1


def test_no_memories_no_block_and_the_default_is_before_message(make_session):
    assert AgentSpec(name="x").memory_placement == "before_message"
    assert AgentIn(name="x").memory_placement == "before_message"  # the HTTP edge too
    req = compile_with(make_session, "before_message")
    assert len(req.contents) == len(HISTORY) + 1
    with pytest.raises(ValueError, match="memory_placement"):
        AgentSpec(name="x", memory_placement="middle")  # type: ignore[arg-type]


def test_trace_reports_static_prefix_reuse_per_agent_and_session(make_session):
    compiler = Compiler.default()
    session = make_session(*HISTORY)
    calm = AgentSpec(name="bot", static_instruction="Stable.")

    def reuse(req: Any) -> Any:
        return next(s for s in req.trace if s.name == "static_instruction").detail.get(
            "prefix_reuse"
        )

    assert reuse(compiler.compile(session, calm, "a")) is None  # nothing to compare yet
    assert reuse(compiler.compile(session, calm, "b")) == {"reused": True, "checks": 1, "hits": 1}
    changed = AgentSpec(name="bot", static_instruction="Changed.")
    assert reuse(compiler.compile(session, changed, "c")) == {
        "reused": False,
        "checks": 2,
        "hits": 1,
    }
    # Another agent in the same session is tracked on its own.
    assert reuse(compiler.compile(session, AgentSpec(name="other"), "d")) is None


# -- over HTTP, without Ray -----------------------------------------------------------------
def _compile(client: Any, **agent: Any) -> Any:
    return client.post(
        "/v1/context:compile",
        json={
            "app_name": "app",
            "user_id": "ana",
            "session_id": "s1",
            "new_message": "tulips?",
            "agent": {"name": "bot", "static_instruction": "Garden helper.", **agent},
        },
    )


def test_http_placement_prefix_reuse_and_context_tokens_metrics(make_http):
    client, backend = make_http()
    backend.service.add_memories(
        [Memory("app", "ana", "s0", "fact", "ana grows tulips", created_at=1.0)]
    )
    backend.sessions.create_session("app", "ana", "s1")
    at_end = _compile(client, memory_preload=True)  # the default placement
    assert at_end.status_code == 200, at_end.text
    out = at_end.json()
    assert "<memory>" not in out["system_instruction"]
    assert "tulips" in out["contents"][-2]["parts"][0]["text"]
    assert out["cacheable_prefix_tokens"] > 0 and len(out["system_hash"]) == 64
    in_system = _compile(client, memory_preload=True, memory_placement="system").json()
    assert "<memory>" in in_system["system_instruction"]
    assert in_system["system_hash"] != out["system_hash"]
    assert in_system["prefix_hash"] == out["prefix_hash"]
    reuse = next(s for s in in_system["trace"] if s["name"] == "static_instruction")
    assert reuse["detail"]["prefix_reuse"] == {"reused": True, "checks": 1, "hits": 1}
    assert _compile(client, static_instruction="Other.").status_code == 200
    metrics = client.get("/metrics").text
    assert "mnemoray_compile_prefix_checks_total 2.0" in metrics
    assert "mnemoray_compile_prefix_reused_total 1.0" in metrics
    assert "mnemoray_compile_prefix_reuse_rate 0.5" in metrics
    assert "mnemoray_compile_context_tokens_count 3.0" in metrics
    total = out["total_tokens"] + in_system["total_tokens"]
    sum_line = next(
        x for x in metrics.splitlines() if x.startswith("mnemoray_compile_context_tokens_sum")
    )
    assert float(sum_line.split()[1]) > total
    bad = _compile(client, memory_placement="middle")
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "agent.memory_placement"
