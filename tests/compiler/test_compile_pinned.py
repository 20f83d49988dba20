"""Pinned compiler output: a fixed session compiled for several agents must give
byte-identical requests (contents, token counts, hashes, trace details), however
the compile is reached: first time, again on the same objects, over fresh copies
(as loaded from a store), with every render cache emptied, and after the session
grew turn by turn. Guards the compiler's caches and fast paths: a speed-up that
changes a byte fails here. The digests were taken before those caches existed."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from mnemoray.compiler import AgentSpec, Compiler, default_processors
from mnemoray.compiler.history_memo import clear_caches
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from mnemoray.summarizers.base import Summary

TOOLS = [
    {
        "name": "lookup",
        "description": "Look an order up.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
    }
]
AGENTS = {
    "atlas": dict(
        name="atlas",
        description="Operations assistant",
        static_instruction="You are Atlas. Be precise.",
        instruction="User: {user:name}. Plan: {plan?}.",
        tools=TOOLS,
    ),
    "researcher": dict(name="researcher", static_instruction="You research."),
    "scoped": dict(name="atlas", include_contents="none"),
    "windowed": dict(name="atlas", tool_result_window=1),
    "budgeted": dict(name="atlas", token_budget=400),
}
# sha256 of each agent's request (``to_dict`` with the trace's timings zeroed), over
# the session with compactions and without.
PINNED = {
    ("atlas", False): "7c2459a98c0b8ddfba81523606de0b53079b4673f2062aef41b5e9d4b3d293c0",
    ("atlas", True): "e4b56451808e57cd4828a6800046e8fe924f489b0d3b1b2c9bbe108ebcf2f70e",
    ("budgeted", False): "8c2143e2db9ba33cacc2dd9f9b17ba6e4c52e559d0eec9e8207b52af5b99a023",
    ("budgeted", True): "f6f74c0159ac084534d9acf410b86e8afe054a92a5361897bd93f3419ee210bc",
    ("researcher", False): "024faf83ac3fef4a6dc146cb61cbb0817f16ff52a9a9fea69fdbfb63505cf046",
    ("researcher", True): "ec87a8fa45e42c7540eca49de166778a4098f14e620c9225b7fd3414e44b7fc8",
    ("scoped", False): "d2c17e2d5b88f176e757390dd1dfa41efca561c7d30c0bba178696283794e146",
    ("scoped", True): "d2c17e2d5b88f176e757390dd1dfa41efca561c7d30c0bba178696283794e146",
    ("windowed", False): "c0c70f2d9b90be4b493756734d2df5ef7f44bfccea0a948f1ea2144f4f8a1ad4",
    ("windowed", True): "50a6ef58d0f2586b4004c3ebbe325434d7fb69d34d4cb021fc7cd7f5d0ae2542",
}
PREFIX_HASH = "21eb92464f102a630a2b02cccdaf570cb81f51c474d79d19cdb40bcb109ef3b2"
SYSTEM_HASH = "f923060031fb6aafa8cbaec8545a0ca83f19c443281e5413ba3b0af84467a923"


def turn(i: int) -> list[Event]:
    """One turn; every third uses a tool, every fifth hands over to the researcher."""
    ts = 1_700_000_000.0 + 100 * i
    events = [
        user_message(
            f"Question {i}: where is order NW-{i:03d}? Ünïcode “ok” 東京",
            id=f"u{i}",
            invocation_id=f"inv{i}",
            timestamp=ts,
            state_delta={"plan": f"p{i}"} if i % 4 == 0 else {},
        )
    ]
    if i % 3 == 0:
        events += [
            tool_call(
                "atlas",
                "lookup",
                {"id": f"NW-{i:03d}", "deep": i % 2 == 0},
                call_id=f"c{i}",
                id=f"tc{i}",
                timestamp=ts + 1,
            ),
            tool_result(
                "atlas",
                "lookup",
                {
                    "status": "shipped",
                    "price": 12.5 * i,
                    "items": [i, None, True],
                    "note": 'quote " backslash \\ newline \n tab \t é',
                },
                call_id=f"c{i}",
                id=f"tr{i}",
                timestamp=ts + 2,
            ),
        ]
    if i % 5 == 0:
        events += [
            Event(
                author="atlas",
                role="system",
                type="control",
                text="transfer",
                id=f"x{i}",
                timestamp=ts + 3,
            ),
            tool_call(
                "researcher",
                "search",
                {"q": f"topic {i}"},
                call_id=f"r{i}",
                id=f"rc{i}",
                timestamp=ts + 4,
            ),
            # Authored by the tool: still the researcher's call.
            tool_result(
                "search",
                "search",
                {"hits": [f"hit {i}a", f"hit {i}b"]},
                call_id=f"r{i}",
                id=f"rr{i}",
                timestamp=ts + 5,
            ),
            model_message("researcher", f"Found {i} things.", id=f"rm{i}", timestamp=ts + 6),
        ]
    if i % 7 == 0:
        events.append(model_message("atlas", "", id=f"e{i}", timestamp=ts + 7))  # empty
        events.append(model_message("atlas", "typing", partial=True, id=f"p{i}", timestamp=ts + 8))
    if i == 2:  # a result logged before its call: its owner is only known at turn 6
        events.append(
            tool_result(
                "search",
                "search",
                {"late": True},
                call_id="late",
                id="late-result",
                timestamp=ts + 7,
            )
        )
    if i == 6:
        events.append(
            tool_call(
                "researcher",
                "search",
                {"q": "late"},
                call_id="late",
                id="late-call",
                timestamp=ts + 7,
            )
        )
    events.append(
        model_message("atlas", f"Answer {i}. " * (1 + i % 4), id=f"a{i}", timestamp=ts + 9)
    )
    return events


def compaction(events: list[Event], event_id: str, with_ids: bool = True) -> Event:
    ids = [e.id for e in events]
    summary = Summary(
        summary=f"Summary of {ids[0]}..{ids[-1]}.", topics=("orders",), source_event_ids=tuple(ids)
    )
    data: dict[str, Any] = {
        "start_ts": events[0].timestamp,
        "end_ts": events[-1].timestamp,
        "summary": summary.to_dict(),
        "raw_tokens": 40 * len(ids),
        "summary_tokens": 10,
    }
    if with_ids:
        data["source_event_ids"] = ids
    return Event(
        author="compactor",
        role="system",
        type="compaction",
        text=summary.summary,
        data=data,
        id=event_id,
        timestamp=events[-1].timestamp + 0.5,
    )


def all_events(compacted: bool) -> list[Event]:
    """20 turns; ``compacted``: compactions over turns 0-3, 0-7 (supersedes the first),
    by time window only 10-12, and one that splits a tool call from its result."""
    turns = [turn(i) for i in range(20)]
    out: list[Event] = []
    for i, events in enumerate(turns):
        out += events
        if not compacted:
            continue
        if i == 3:
            out.append(compaction([e for t in turns[:4] for e in t], "k1"))
        if i == 7:
            out.append(compaction([e for t in turns[:8] for e in t], "k2"))
        if i == 12:
            out.append(compaction([e for t in turns[10:13] for e in t], "k3", with_ids=False))
        if i == 15:  # covers a tool call but not its result: both stay shown
            out.append(compaction([e for e in turns[15] if e.id in ("u15", "tc15")], "k4"))
    return out


# The default processors when the digests were taken, in their order then: one added
# later (with its own trace step) must not change them, and neither may the stable
# layout, which moved the identity (and the user profile, added later) before the
# instruction: the order changes the system instruction, not what a processor renders.
PINNED_STEPS = (
    "static_instruction",
    "instruction",
    "identity",
    "history",
    "tool_results",
    "memory_preload",
    "artifacts",
    "token_budget",
)


def pinned_compiler(steps: tuple[str, ...] = PINNED_STEPS) -> Compiler:
    """Today's default processors, those of ``steps`` in that order."""
    by_name = {p.name: p for p in default_processors()}
    return Compiler([by_name[name] for name in steps])


def new_session(events: list[Event]) -> Session:
    session = Session(
        app_name="app", user_id="u1", session_id="pinned", state={"user:name": "Dana"}
    )
    for event in events:
        session.apply(event)
    return session


def digest(request: Any) -> str:
    """Leaves out the timings and the prefix-reuse counts (they depend on how many
    compiles the same compiler saw before; tests/compiler/test_static_instruction.py),
    and the trace's ``cacheable_prefix`` entry, added after the digests were taken:
    its tokens are the request's own ``cacheable_prefix_tokens``, which are pinned."""
    out = request.to_dict()
    summary = out["trace"].pop()
    assert summary["name"] == "cacheable_prefix"
    assert summary["detail"]["tokens"] == out["cacheable_prefix_tokens"]
    for step in out["trace"]:
        step["micros"] = 0
        step["detail"].pop("prefix_reuse", None)
    return hashlib.sha256(
        json.dumps(out, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()


def compile_as(compiler: Compiler, session: Session, agent: str) -> Any:
    return compiler.compile(session, AgentSpec(**AGENTS[agent]), new_message="What now?")


@pytest.fixture(autouse=True)
def _empty_caches():
    clear_caches()
    yield
    clear_caches()


CASES = sorted(PINNED)


@pytest.mark.parametrize(("agent", "compacted"), CASES)
def test_compile_is_pinned_on_every_path(agent, compacted):
    events = all_events(compacted)
    pinned = PINNED[agent, compacted]
    compiler = pinned_compiler()
    session = new_session(events)
    first = compile_as(compiler, session, agent)
    assert digest(first) == pinned
    assert digest(compile_as(compiler, session, agent)) == pinned  # same objects

    fresh = copy.copy(session)  # as a server loads it from its store
    fresh.events = [Event.from_dict(e.to_dict()) for e in events]
    assert digest(compile_as(compiler, fresh, agent)) == pinned
    clear_caches()
    assert digest(compile_as(compiler, fresh, agent)) == pinned


@pytest.mark.parametrize(("agent", "compacted"), CASES)
def test_compile_is_pinned_after_the_session_grew(agent, compacted):
    events = all_events(compacted)
    compiler = pinned_compiler()
    session = new_session([])
    for event in events:  # one compile per event appended, as an agent loop does
        session.apply(event)
        grown = compile_as(compiler, session, agent)
        reloaded = new_session([Event.from_dict(e.to_dict()) for e in session.events])
        alone = compile_as(pinned_compiler(), reloaded, agent)
        assert digest(grown) == digest(alone), event.id
    assert digest(compile_as(compiler, session, agent)) == PINNED[agent, compacted]


def test_hashes_are_pinned():
    request = compile_as(pinned_compiler(), new_session(all_events(True)), "atlas")
    assert (request.prefix_hash, request.system_hash) == (PREFIX_HASH, SYSTEM_HASH)
