"""The compile benchmark's generated sessions (``benchmarks/compile_bench.py``: user
turns, two agents, tool calls with JSON results, control noise, compactions every 20
turns) compiled on every path must give the requests pinned before the cold-render
fast paths (``casting.render_each``, ``casting.payload_tokens``): contents, token
counts, prefix and system hashes and trace details, byte for byte. The digests were
taken with the compiler of commit 6f6084a; ``tests/compiler/test_compile_pinned.py``
pins the edge cases (escapes, Unicode, late results, superseded compactions)."""

from __future__ import annotations

import copy
import hashlib
import itertools
import uuid

import pytest

from benchmarks.compile_bench import INSTRUCTION, STATIC, TOOLS, build_session
from mnemoray.compiler import AgentSpec
from mnemoray.compiler.history_memo import clear_caches
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from tests.compiler.test_compile_pinned import digest, pinned_compiler

AGENTS = {
    "atlas": AgentSpec(
        name="atlas",
        description="Customer-operations assistant",
        static_instruction=STATIC,
        instruction=INSTRUCTION,
        tools=TOOLS,
    ),
    # Sees atlas's messages and tool use as narrative (the other rendering branches).
    "researcher": AgentSpec(name="researcher", static_instruction="You research."),
}
# sha256 over the digests of every turn's request (the session replayed as the bench
# does), and the final session's request per agent.
PINNED = {
    (50, False, "replay"): "809708af3c84bf4ac8386a6c0f96cb800398b530c5f4be016839fda67704eeb9",
    (50, False, "atlas"): "4de29f105fafadd921a64331145c66ef2e29982770f7c732f6aa5678a2fe5f4c",
    (50, False, "researcher"): "5070b5e2bee495829db632846236ac3c7969aab15a5b8712e50b5dbabb66d85a",
    (50, True, "replay"): "e1d21da3d1549051f4e8bf76d70e604119102a2ebd485c1f974554f59ec9f6f2",
    (50, True, "atlas"): "84d59fb1b23aea50d13a73ee4ade973f9dd2b60aadf21293972d6e5fb3c01a57",
    (50, True, "researcher"): "0d9a5592a0a6e6b152334977f53c97674a71e4fcb46fa2ebd8377e397b8c9876",
    (200, False, "replay"): "777a1cd3eaa90bb34b6b0fba1e5e4b811de3cbcf960fe1dee4788d3ed235cc24",
    (200, False, "atlas"): "e3e0f7e5e826a7de4ccf1f69f796897619efce402296683db631510c3fe34b41",
    (200, False, "researcher"): "ecb3844bbed12bf94cb3b84c3ad3dac3f2ce13aabf859ffcc3bb12cffd11615a",
    (200, True, "replay"): "e645f6055494e0ddf5c4f71203aff1b5a2561b7e8303374a05a61ffa9c2f4f80",
    (200, True, "atlas"): "e23c0e689d5dfcc83154625c8efc14b258be0f8c178f978f899b60941be0141d",
    (200, True, "researcher"): "1b1da083cd7e30ede08fb7fda9f02ee2e60b7a5eb83736029bad9680aecb84a3",
    # The latency target's setting: the first 1000 events of the 1000-turn session.
    (1000, False, "atlas"): "2fd3d6ef86f3908a631f33af9ddb188b965905e45b351c3a829f92bceb0521fc",
    (1000, False, "researcher"): "439cef1bf2361e0083bfbd675c58e9b27d47df011d39cb566b719a2aa778e385",
}
# The default processors and their order when the digests were taken (the stable layout
# since moved the identity and the user profile before the instruction).
PINNED_ORDER = (
    "static_instruction",
    "instruction",
    "identity",
    "user_profile",
    "history",
    "tool_results",
    "memory_preload",
    "artifacts",
    "token_budget",
)


@pytest.fixture(autouse=True)
def _stable_ids(monkeypatch):
    """Event ids from a counter (they are in the contents), caches empty."""
    counter = itertools.count(1)
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(counter) << 64))
    clear_caches()
    yield
    clear_caches()


def _fresh(session: Session, events: list[Event]) -> Session:
    """``session`` holding new objects equal to ``events`` (as loaded from a store)."""
    out = copy.copy(session)
    out.events = [Event.from_dict(e.to_dict()) for e in events]
    return out


def _final_on_every_path(session: Session, agent: str, message: str) -> str:
    """The digest of the request for ``session``: first compile, again over the same
    objects, over fresh objects, and over fresh objects with every cache emptied."""
    compiler = pinned_compiler(PINNED_ORDER)
    spec = AGENTS[agent]
    digests = {
        digest(compiler.compile(session, spec, new_message=message)),
        digest(compiler.compile(session, spec, new_message=message)),
        digest(compiler.compile(_fresh(session, session.events), spec, new_message=message)),
    }
    clear_caches()
    digests.add(
        digest(compiler.compile(_fresh(session, session.events), spec, new_message=message))
    )
    assert len(digests) == 1
    return digests.pop()


def _check(key: tuple, value: str) -> None:
    # An empty pin prints the value to record (how the digests were taken).
    assert PINNED[key] == value, f"{key}: {value}"


@pytest.mark.parametrize(
    ("turns", "compacted"), [(50, False), (50, True), (200, False), (200, True)]
)
def test_bench_sessions_compile_as_pinned(turns, compacted):
    full, starts = build_session(turns, compacted)
    session = Session(
        app_name="bench",
        user_id="u1",
        session_id=f"s{turns}",
        state={"user:name": "Dana", "user:language": "en"},
    )
    compiler = pinned_compiler(PINNED_ORDER)
    replay = hashlib.sha256()
    for start_at in starts:  # every turn's request, the session object kept (the bench)
        for event in full.events[len(session.events) : start_at]:
            session.apply(event)
        request = compiler.compile(session, AGENTS["atlas"], new_message=full.events[start_at].text)
        replay.update(digest(request).encode())
    _check((turns, compacted, "replay"), replay.hexdigest())
    last = full.events[starts[-1]].text
    for agent in AGENTS:
        clear_caches()
        _check((turns, compacted, agent), _final_on_every_path(full, agent, last))


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_target_setting_compiles_as_pinned(agent):
    full, _ = build_session(1000, compaction=False)
    cut = copy.copy(full)
    cut.events = full.events[:1000]
    _check((1000, False, agent), _final_on_every_path(cut, agent, "Where is my order?"))
