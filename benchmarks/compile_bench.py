"""Context-compiler benchmark: tokens vs a naive transcript, latency, prefix stability.

For generated sessions of 50/200/1000 turns (user messages, agent replies,
tool calls with JSON results, a second agent, state deltas, control noise)
it replays the session and compiles every turn's request, with and without
a compaction event every 20 turns, and reports:

- compiled tokens at the last turn vs a naive "append every event's text"
  prompt (the same instructions plus every event's text / tool JSON);
- compile latency p50/p95 over all turns (the agent keeps its session object
  between turns, as an in-process agent does), and "cold" at the final size:
  every event a fresh object, as when a server loads the session per request;
- prefix-hash stability: the fraction of consecutive turns whose prefix hash
  is identical (must be 100%);
- the latency target's setting: one session cut at exactly 1000 events, warm, cold,
  with an empty render cache and with the token counter's memo emptied too, each split
  by compiler step (``compile_paths``), with the machine (CPU model, cores, load) it ran on.

Run: ``.venv/bin/python benchmarks/compile_bench.py`` -> table on stdout and
``benchmarks/results/compile.json``; ``--target-only`` measures only the 1000-event
setting; ``--before FILE`` puts an earlier result's figures beside this run's.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Run by its path too: the repo root (``benchmarks``, ``mnemoray``) on the import path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.compile_paths import at_event_count, percentile, print_paths  # noqa: E402
from mnemoray.compiler import AgentSpec, Compiler  # noqa: E402
from mnemoray.sessions.events import (  # noqa: E402
    Event,
    model_message,
    tool_call,
    tool_result,
    user_message,
)
from mnemoray.sessions.session import Session  # noqa: E402
from mnemoray.summarizers.base import Summary  # noqa: E402
from mnemoray.tokens import count_tokens  # noqa: E402

TURN_COUNTS = (50, 200, 1000)
COMPACT_EVERY = 20
COLD_REPEATS = 30
WARM_REPEATS = 200
TARGET_EVENTS = 1000
RESULTS = Path(__file__).parent / "results" / "compile.json"

VOCABULARY = """
order shipment invoice refund customer account billing address delivery warehouse package
tracking payment card subscription plan upgrade discount coupon product laptop monitor
keyboard headphones warranty return policy schedule meeting calendar flight hotel booking
itinerary budget report quarter revenue forecast analysis dataset query table column error
deploy service latency region cluster memory storage backup restore migration ticket
priority support escalation manager team project deadline milestone review feedback
"""
FUNCTION_WORDS = "the a to of and for with on in my your this that is was will can please"
WORDS = tuple(VOCABULARY.split())
GLUE = tuple(FUNCTION_WORDS.split())

STATIC = (
    "You are Atlas, a customer-operations assistant for Northwind Traders. "
    "Answer precisely, cite order ids, never invent data, and use tools to look "
    "things up. Keep replies short unless the user asks for detail. " * 3
).strip()
INSTRUCTION = (
    "The user's name is {user:name}. Preferred language: {user:language?}. "
    "Current plan: {plan?}. Open ticket: {ticket?}."
)
TOOLS = [
    {
        "name": "lookup_order",
        "description": "Look an order up by id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
    {
        "name": "search_kb",
        "description": "Search the knowledge base.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
]


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) if rng.random() < 0.55 else rng.choice(GLUE) for _ in range(n)]
    return " ".join(words).capitalize() + rng.choice(".?!")


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng, rng.randint(6, 16)) for _ in range(sentences))


def order_json(rng: random.Random) -> dict:
    return {
        "order_id": f"NW-{rng.randint(10000, 99999)}",
        "status": rng.choice(["shipped", "pending", "delivered", "returned"]),
        "items": [
            {
                "sku": f"SKU-{rng.randint(100, 999)}",
                "name": rng.choice(WORDS),
                "qty": rng.randint(1, 4),
                "price": round(rng.uniform(5, 900), 2),
            }
            for _ in range(rng.randint(2, 6))
        ],
        "shipping": {
            "carrier": rng.choice(["UPS", "DHL", "FedEx"]),
            "eta": f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
        },
        "notes": sentence(rng, rng.randint(8, 20)),
    }


def turn_events(rng: random.Random, turn: int, clock: list[float]) -> list[Event]:
    """One turn: user message, maybe tool use (own or the second agent's), reply."""

    def at() -> float:
        clock[0] += rng.uniform(0.5, 20.0)
        return clock[0]

    delta = {"plan": rng.choice(["basic", "pro", "team"])} if rng.random() < 0.1 else {}
    if rng.random() < 0.05:
        delta["ticket"] = f"T-{turn}"
    events = [
        user_message(
            paragraph(rng, rng.randint(1, 3)),
            state_delta=delta,
            invocation_id=f"inv{turn}",
            timestamp=at(),
        )
    ]
    if rng.random() < 0.35:
        call_id = f"call-{turn}"
        events.append(
            tool_call(
                "atlas", "lookup_order", {"order_id": f"NW-{turn}"}, call_id=call_id, timestamp=at()
            )
        )
        events.append(
            tool_result("atlas", "lookup_order", order_json(rng), call_id, timestamp=at())
        )
    if rng.random() < 0.15:
        call_id = f"rcall-{turn}"
        events.append(
            Event(
                author="atlas",
                role="system",
                type="control",
                text="transfer_to_agent: researcher",
                timestamp=at(),
            )
        )
        events.append(
            tool_call(
                "researcher",
                "search_kb",
                {"query": sentence(rng, 5)},
                call_id=call_id,
                timestamp=at(),
            )
        )
        events.append(
            tool_result(
                "researcher",
                "search_kb",
                {"hits": [paragraph(rng, 1) for _ in range(3)]},
                call_id,
                timestamp=at(),
            )
        )
        events.append(model_message("researcher", paragraph(rng, 2), timestamp=at()))
    events.append(model_message("atlas", paragraph(rng, rng.randint(2, 5)), timestamp=at()))
    return events


def compaction_event(events: list[Event], rng: random.Random) -> Event:
    """A compaction over ``events`` (what the Compactor would append)."""
    ids = tuple(e.id for e in events)
    summary = Summary(
        summary=paragraph(rng, 4), topics=tuple(rng.sample(WORDS, 3)), source_event_ids=ids
    )
    end = events[-1].timestamp
    return Event(
        author="compactor",
        role="system",
        type="compaction",
        text=summary.summary,
        data={
            "start_ts": events[0].timestamp,
            "end_ts": end,
            "summary": summary.to_dict(),
            "source_event_ids": list(ids),
        },
        timestamp=end + 0.001,
    )


def naive_tokens(session: Session, new_message: str) -> int:
    """Instructions plus every event's text (tool payloads as JSON), nothing dropped."""
    total = count_tokens(STATIC) + count_tokens(INSTRUCTION) + count_tokens(new_message)
    for e in session.events:
        if e.type == "compaction":
            continue  # a naive transcript has no summaries
        if e.type in ("tool_call", "tool_result"):
            total += count_tokens(json.dumps(e.data, sort_keys=True))
        else:
            total += count_tokens(e.text)
    return total


@dataclass
class Run:
    turns: int
    compaction: bool
    events: int
    naive_tokens: int
    compiled_tokens: int
    warm_p50_ms: float
    warm_p95_ms: float
    cold_p50_ms: float
    cold_p95_ms: float
    prefix_stable: float


def new_session(turns: int) -> Session:
    return Session(
        app_name="bench",
        user_id="u1",
        session_id=f"s{turns}",
        state={"user:name": "Dana", "user:language": "en"},
    )


def build_session(turns: int, compaction: bool) -> tuple[Session, list[int]]:
    """A session of ``turns`` turns, plus the index of each turn's user message."""
    rng = random.Random(turns)
    session = new_session(turns)
    clock = [1_700_000_000.0]
    since_compaction: list[Event] = []
    starts = []
    for turn in range(turns):
        events = turn_events(rng, turn, clock)
        starts.append(len(session.events))
        for event in events:
            session.apply(event)
        since_compaction.extend(events)
        if compaction and (turn + 1) % COMPACT_EVERY == 0:
            session.apply(compaction_event(since_compaction, rng))
            since_compaction = []
    return session, starts


def cold_latencies(
    compiler: Compiler, agent: AgentSpec, session: Session, new_message: str
) -> list[float]:
    """Compile over fresh copies of every event (a server loading the session)."""
    raw = [e.to_dict() for e in session.events]
    times = []
    for _ in range(COLD_REPEATS):
        fresh = copy.copy(session)
        fresh.events = [Event.from_dict(e) for e in raw]
        start = time.perf_counter_ns()
        compiler.compile(fresh, agent, new_message=new_message)
        times.append((time.perf_counter_ns() - start) / 1e6)
    return times


def run(turns: int, compaction: bool, compiler: Compiler, agent: AgentSpec) -> Run:
    """Replay the session turn by turn, compiling every turn's request."""
    full, starts = build_session(turns, compaction)
    session = new_session(turns)
    warm: list[float] = []
    hashes: list[str] = []
    for start_at in starts:
        # History is everything before this turn's user message, state included.
        for event in full.events[len(session.events) : start_at]:
            session.apply(event)
        message = full.events[start_at].text
        start = time.perf_counter_ns()
        request = compiler.compile(session, agent, new_message=message)
        warm.append((time.perf_counter_ns() - start) / 1e6)
        hashes.append(request.prefix_hash)
    last = full.events[starts[-1]].text
    final = compiler.compile(full, agent, new_message=last)
    cold = cold_latencies(compiler, agent, full, last)
    stable = sum(a == b for a, b in zip(hashes, hashes[1:], strict=False)) / (len(hashes) - 1)
    return Run(
        turns,
        compaction,
        len(full.events),
        naive_tokens(full, last),
        final.total_tokens,
        percentile(warm, 50),
        percentile(warm, 95),
        percentile(cold, 50),
        percentile(cold, 95),
        stable,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events",
        type=int,
        default=TARGET_EVENTS,
        help="the latency target's session size (default %(default)s)",
    )
    parser.add_argument(
        "--target-only",
        action="store_true",
        help="measure only that setting (no 50/200/1000-turn replays)",
    )
    parser.add_argument(
        "--before", type=Path, help="an earlier results JSON whose target figures go beside these"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    compiler = Compiler.default()
    agent = AgentSpec(
        name="atlas",
        description="Customer-operations assistant",
        static_instruction=STATIC,
        instruction=INSTRUCTION,
        tools=TOOLS,
    )
    runs = (
        []
        if args.target_only
        else [run(t, c, compiler, agent) for t in TURN_COUNTS for c in (False, True)]
    )
    full, _ = build_session(1000, compaction=False)
    repeats = {
        "warm": WARM_REPEATS,
        "cold": COLD_REPEATS * 4,
        "empty_cache": COLD_REPEATS * 2,
        "memo_empty": COLD_REPEATS,
    }
    target = at_event_count(full, args.events, compiler, agent, repeats)
    before = json.loads(args.before.read_text())["at_target_events"] if args.before else None
    if runs:
        print_runs(runs)
    print_paths(target, before)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "machine": target["machine"],
        "compact_every_turns": COMPACT_EVERY,
        "runs": [vars(r) for r in runs],
        "at_target_events": target,
    }
    if before:
        out["before"] = before
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


def print_runs(runs: list[Run]) -> None:
    header = (
        f"{'turns':>5} {'compact':>7} {'events':>6} {'naive tok':>9} {'compiled':>9} "
        f"{'ratio':>6} {'p50 ms':>7} {'p95 ms':>7} {'cold p50':>8} {'cold p95':>8} "
        f"{'same prefix':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in runs:
        print(
            f"{r.turns:>5} {'yes' if r.compaction else 'no':>7} {r.events:>6} "
            f"{r.naive_tokens:>9} {r.compiled_tokens:>9} "
            f"{r.compiled_tokens / r.naive_tokens:>6.2f} {r.warm_p50_ms:>7.2f} "
            f"{r.warm_p95_ms:>7.2f} {r.cold_p50_ms:>8.2f} {r.cold_p95_ms:>8.2f} "
            f"{r.prefix_stable:>11.0%}"
        )
    print(
        f"p50/p95: every turn's compile as the session grows (session object kept, as an "
        f"in-process agent does); cold: {COLD_REPEATS} compiles of the final session over "
        f"fresh event objects (as after loading from a store). Tokens at the last turn."
    )


if __name__ == "__main__":
    main()
