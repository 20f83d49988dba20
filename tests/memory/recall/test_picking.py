"""What a recall returns: no two records that say the same thing, a fact shown as the
chunk of its turn, and a token budget filled with the best that fit (real MiniLM)."""

from __future__ import annotations

import re

import pytest

from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.embedders import open_embedder
from mnemoray.memory.recall.picking import Pick, joined, pick
from mnemoray.memory.records.filters import RetrievalError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from mnemoray.text import terms
from mnemoray.tokens import count_tokens
from tests.support.factories import DAY, T0, session

MOVE = "Big news: I moved to Berlin last month for a new job at Zeta Labs."


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> MemoryService:
    svc = MemoryService(
        MemoryStore(tmp_path_factory.mktemp("picking") / "store"),
        open_embedder("default"),
        ExtractiveSummarizer(),
    )
    svc.add_session(
        session(
            "move",
            T0,
            ("u", MOVE),
            ("m", "Congratulations! How is the new job going so far?"),
            ("u", "I love it. My team builds warehouse robots."),
            ("m", "That sounds exciting."),
        )
    )
    # The same sentence said again in another session: one memory's words, twice.
    svc.add_session(session("again", T0 + 30 * DAY, ("u", MOVE), ("m", "You told me!")))
    for i, topic in enumerate(["sourdough bread", "tax deadlines", "marathon training"]):
        svc.add_session(
            session(
                f"other{i}",
                T0 + (40 + i) * DAY,
                ("u", f"Can you help me with {topic}? I keep getting it wrong."),
                ("m", f"Sure, here is a short guide to {topic} with the usual mistakes."),
            )
        )
    return svc


def _shares(a: str, b: str) -> float:
    """Share of ``a``'s content terms that ``b`` holds."""
    want = set(terms(a))
    return len(want & set(terms(b))) / len(want)


def test_no_two_results_say_the_same_thing(service: MemoryService) -> None:
    got = service.search("app", "alice", "where did I move for my new job?", top_k=8)
    texts = [r.memory.text for r in got]
    # The move sentence is a fact of each session, in a chunk of each and in their
    # summaries: it comes back once per session at most, and never as a fact beside
    # the chunk that holds it.
    holding = [r.memory.session_id for r in got if _shares(MOVE, r.memory.text) >= 0.8]
    assert holding and len(holding) == len(set(holding)), texts
    # No result's words are mostly a better one's (a copy costs tokens and a place).
    for i, a in enumerate(got):
        for b in got[i + 1 :]:
            assert _shares(b.memory.text, a.memory.text) < 0.8, (a.memory.text, b.memory.text)


def test_a_fact_is_shown_as_the_chunk_of_its_turn(service: MemoryService) -> None:
    facts = service.search("app", "alice", "moved to Berlin", top_k=3, filters={"kinds": ["fact"]})
    assert facts and "Berlin" in facts[0].memory.text
    got = service.search("app", "alice", "moved to Berlin", top_k=3)
    top = got[0]
    # The fact ranked first; its place shows the words it came from, who said them
    # and when, ranked as the fact was (its score and signals).
    assert top.memory.kind == "chunk" and top.in_place_of == facts[0].memory.memory_id
    assert set(facts[0].memory.source_event_ids) <= set(top.memory.source_event_ids)
    assert top.memory.session_id == facts[0].memory.session_id
    assert top.memory.text.split("] ", 1)[1].startswith("user: Big news: I moved to Berlin")
    assert top.score == pytest.approx(facts[0].score)
    assert top.to_dict()["in_place_of"] == facts[0].memory.memory_id
    assert all(r.memory.memory_id != facts[0].memory.memory_id for r in got)


def test_a_budget_keeps_the_best_that_fit(service: MemoryService) -> None:
    query = "what do I do at my new job?"
    plain = service.search("app", "alice", query, top_k=10)
    assert sum(count_tokens(r.memory.text) for r in plain) > 60
    budget = 60
    fitted = service.recall(service.resolve("app", "alice", query, 10, budget_tokens=budget))
    assert fitted and sum(count_tokens(r.memory.text) for r in fitted) <= budget
    # In rank order: what fits of the unbudgeted ranking (a longer record passed over).
    order = [r.memory.memory_id for r in plain]
    assert [r.memory.memory_id for r in fitted] == [
        m for m in order if m in {r.memory.memory_id for r in fitted}
    ]
    first_fit = next(r for r in plain if count_tokens(r.memory.text) <= budget)
    assert fitted[0].memory.memory_id == first_fit.memory.memory_id
    with pytest.raises(RetrievalError, match="budget_tokens"):
        service.resolve("app", "alice", query, 10, budget_tokens=0)


def test_preload_within_a_budget_groups_memories_by_session(service: MemoryService) -> None:
    agent = AgentSpec(name="helper", memory_preload=True, preload_top_k=6)
    compiled = Compiler.default().compile(
        session("now", T0 + 60 * DAY, ("u", "How is my job in Berlin going?")),
        agent,
        services=Services(memory_search=service.memory_search()),
    )
    budgeted = Compiler.default().compile(
        session("now", T0 + 60 * DAY, ("u", "How is my job in Berlin going?")),
        AgentSpec(name="helper", memory_preload=True, preload_top_k=6, preload_budget_tokens=80),
        services=Services(memory_search=service.memory_search()),
    )

    def block(request) -> str:
        return next(
            p["text"]
            for c in request.to_dict()["contents"]
            for p in c["parts"]
            if "<memory>" in (p.get("text") or "")
        )

    full, small = block(compiled), block(budgeted)
    # One header line per session, with its date; its memories under it.
    assert "[2023-11-14, session move]" in full
    assert full.count("session move]") == 1
    entries = [line for line in small.splitlines() if line.startswith("- ")]
    assert entries and sum(count_tokens(line[2:]) for line in entries) <= 80
    assert len(small) < len(full)


def test_a_chunk_that_does_not_fit_leaves_its_fact(service: MemoryService) -> None:
    got = service.recall(service.resolve("app", "alice", "moved to Berlin", 3, budget_tokens=20))
    assert got and got[0].memory.kind == "fact" and "Berlin" in got[0].memory.text
    assert got[0].in_place_of is None
    assert sum(count_tokens(r.memory.text) for r in got) <= 20


PLANTS = " ".join(
    f"Step {i}: water the {plant} every {i + 2} days and keep it out of the afternoon sun."
    for i, plant in enumerate(["fern", "basil", "orchid", "cactus", "ivy", "mint", "rose"] * 3)
)


@pytest.fixture(scope="module")
def long_answer(tmp_path_factory) -> MemoryService:
    svc = MemoryService(
        MemoryStore(tmp_path_factory.mktemp("parts") / "store"),
        open_embedder("default"),
        ExtractiveSummarizer(),
    )
    svc.add_session(
        session(
            "plants",
            T0,
            ("u", "How do I care for my plants?"),
            ("m", PLANTS),
            ("u", "Thanks! I grow tomatoes on my balcony."),
        )
    )
    return svc


def test_a_long_answer_asked_about_comes_back_as_one_passage(long_answer: MemoryService) -> None:
    q = "Can you remind me how often you said to water the fern, the orchid and the rose?"
    got = long_answer.search("app", "alice", q, top_k=10)
    passage = next(r for r in got if r.joined)
    # Its parts, in order, as one result in the place of the best one: the words of
    # each part once, and the parts' ids named.
    chunks = long_answer.search("app", "alice", "water", top_k=20, filters={"kinds": ["chunk"]})
    parts = {r.memory.memory_id: r.memory for r in chunks}
    numbers = [int(n) for n in re.findall(r"\(part (\d+)/\d+\)", passage.memory.text)]
    assert len(numbers) == 1 + len(passage.joined) >= 2 and numbers == sorted(numbers)
    assert set(passage.joined) <= set(parts) and passage.memory.memory_id not in passage.joined
    assert passage.to_dict()["joined"] == list(passage.joined)
    assert "plants-e1" in passage.memory.source_event_ids
    # No other result repeats a part it holds; each part counts as one of top_k.
    rest = [r for r in got if r is not passage]
    assert all(r.memory.memory_id not in passage.joined for r in rest)
    assert len(rest) + len(numbers) <= 10
    small = long_answer.search("app", "alice", q, top_k=2)
    assert sum(1 + len(r.joined) for r in small) <= 2


def test_parts_are_joined_only_for_the_side_asked_about(long_answer: MemoryService) -> None:
    # The user's own words asked about: the assistant's parts come back one by one.
    got = long_answer.search("app", "alice", "How often do I water my fern and orchid?", top_k=10)
    assert got and not any(r.joined for r in got)
    # No side asked about: none joined either.
    got = long_answer.search("app", "alice", "watering ferns and orchids", top_k=10)
    assert got and not any(r.joined for r in got)


def test_a_summary_below_a_record_of_its_session_is_left_out(service: MemoryService) -> None:
    q = "how is the new job with the warehouse robots?"
    summaries = service.search("app", "alice", q, top_k=8, filters={"kinds": ["session_summary"]})
    assert "move" in {r.memory.session_id for r in summaries}  # there is one to leave out
    got = service.search("app", "alice", q, top_k=8)
    assert got[0].memory.session_id == "move" and got[0].memory.kind != "session_summary"
    seen: set[str] = set()
    for r in got:
        assert not (r.memory.kind == "session_summary" and r.memory.session_id in seen)
        seen.add(r.memory.session_id)


def _chunk(text: str, *events: str) -> Memory:
    return Memory("app", "alice", "s", "chunk", text, events, created_at=T0)


def test_parts_of_two_turns_in_one_window_are_not_joined() -> None:
    # A window may end one long turn and start the next: its part lines are of two
    # turns, and each joins only the parts of its own.
    x4 = _chunk("[2026-01-01] user (part 4/5): Fourth part of the first story.", "x")
    x5y1 = _chunk(
        "[2026-01-01] user (part 5/5): End of the first story.\n"
        "[2026-01-01] user (part 1/2): Start of the second story.",
        "x",
        "y",
    )
    y2 = _chunk("[2026-01-01] user (part 2/2): End of the second story.", "y")
    records = [y2, x5y1, x4]
    picks = pick([0, 1, 2], lambda ps: [records[p] for p in ps], 10, join_side="user")
    # y's part 2 joins the window whose last line is y's part 1, in part order; x's
    # part 4 shares that window too (its first line is x's part 5) but is of another
    # turn: it stays a result of its own.
    passage, alone = picks
    assert passage.parts == (1, 0) and passage.shown == 0
    text = joined([records[p] for p in passage.parts]).text
    assert text.index("part 5/5") < text.index("part 1/2") < text.index("part 2/2")
    assert "part 4/5" not in text
    assert alone == Pick(2, 2)


def test_a_part_shown_twice_is_not_joined_again() -> None:
    # With overlapping windows, the same part is in two chunks: one is enough.
    first = "We walked from the harbour past the old lighthouse towards the cliffs."
    a = _chunk(f"[2026-01-01] user: Hello.\n[2026-01-01] user (part 1/2): {first}", "a", "x")
    again = _chunk(f"[2026-01-01] user (part 1/2): {first}", "x")
    rest = _chunk(
        "[2026-01-01] user (part 2/2): Then rain came, so we sheltered in a bakery "
        "and ate warm cinnamon buns until evening.",
        "x",
    )
    records = [a, again, rest]
    picks = pick([0, 1, 2], lambda ps: [records[p] for p in ps], 10, join_side="user")
    passage = next(p for p in picks if p.parts)
    assert passage.shown in passage.parts and sorted(passage.parts) == [0, 2]


def test_a_short_line_is_repeated_only_word_for_word() -> None:
    # A chess game's moves are quoted again and again in one session; the assistant's
    # one-line answer beside a quote is new, though each of its terms is in a better
    # record ("28. Kg3" and "move" are): it is not a repeat of that record.
    moves = "22. Re5 f6 23. Re3 Rbc8 24. h3 g5 25. g4 hxg4 26. hxg4 Rh8 27. Kg2 Bd5+"
    better = _chunk(f"[2026-01-01] user: make a move. you're white\n{moves} 28. Kg3 Be6", "later")
    answer = _chunk(
        f"[2026-01-01] user (part 2/2): {moves}\n[2026-01-01] assistant: 28. Kg3 would be my move.",
        "asked",
        "answered",
    )
    records = [better, answer]
    picks = pick([0, 1], lambda ps: [records[p] for p in ps], 10)
    assert [p.shown for p in picks] == [0, 1]
    # The same lines again word for word (another turn quoting both): a repeat.
    quoted = _chunk(f"[2026-01-01] user: {moves}\n[2026-01-01] user: make a move.", "again")
    records = [better, quoted]
    assert [p.shown for p in pick([0, 1], lambda ps: [records[p] for p in ps], 10)] == [0]
