"""distill_session: record kinds, exact provenance, chunks, compaction reuse."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.errors import InvalidInput
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.summarizers import ExtractiveSummarizer, Summary
from tests.support.factories import DAY, T2026

T = T2026 + 4 * DAY  # 2026-01-05T00:00:00Z
NOW = 2_000_000_000.0
AGENT = "travel_agent"


class CountingSummarizer(ExtractiveSummarizer):
    """The real extractive summarizer, remembering every event it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[Event]] = []

    def summarize(self, events: Sequence[Event]) -> Summary:
        self.calls.append(list(events))
        return super().summarize(events)

    @property
    def seen_ids(self) -> list[str]:
        return [e.id for call in self.calls for e in call]


def parrot_events() -> list[Event]:
    return [
        user_message(
            "I'm thinking about getting a pet parrot. What should I know?",
            id="u1",
            timestamp=T,
            invocation_id="i1",
        ),
        model_message(
            AGENT,
            "Parrots are intelligent, social birds that need daily "
            "attention, a large cage and a varied diet.",
            id="m1",
            timestamp=T + 10,
            invocation_id="i1",
        ),
        user_message(
            "I really like African Grey parrots because they can talk. "
            "My apartment is small though.",
            id="u2",
            timestamp=T + 20,
            invocation_id="i2",
        ),
        tool_call(
            AGENT,
            "search_birds",
            {"size": "small"},
            call_id="c1",
            id="t1",
            timestamp=T + 21,
            invocation_id="i2",
        ),
        tool_result(
            "search_birds",
            "search_birds",
            {"birds": ["budgie", "cockatiel"]},
            call_id="c1",
            id="r1",
            timestamp=T + 22,
            invocation_id="i2",
        ),
        model_message(
            AGENT,
            "African Greys need space. In a small apartment, consider budgies or cockatiels.",
            id="m2",
            timestamp=T + 30,
            invocation_id="i2",
        ),
        Event(
            author=AGENT,
            role="system",
            type="control",
            data={"action": "noop"},
            id="ctl",
            timestamp=T + 31,
            invocation_id="i2",
        ),
        model_message(AGENT, "Cockat", partial=True, id="p1", timestamp=T + 32),
        user_message(
            "I moved to Madrid in March. My daughter's name is Ana.",
            id="u3",
            timestamp=T + DAY,
            invocation_id="i3",
        ),
        model_message(
            AGENT,
            "Thanks, noted for future trips.",
            id="m3",
            timestamp=T + DAY + 5,
            invocation_id="i3",
        ),
    ]


def make_session(events: Sequence[Event], session_id: str = "s1") -> Session:
    session = Session("bird-chat", "maya", session_id, created_at=T)
    for e in events:
        session.apply(e.with_session(session_id))
    return session


def by_kind(records: list[Memory], kind: str) -> list[Memory]:
    return [r for r in records if r.kind == kind]


def test_record_kinds_and_exact_provenance() -> None:
    records = distill_session(
        make_session(parrot_events()),
        ExtractiveSummarizer(),
        chunk_turns=2,
        chunk_overlap=0,
        now=NOW,
    )
    assert [r.kind for r in records] == ["session_summary"] + ["fact"] * 5 + ["chunk"] * 3
    summary = by_kind(records, "session_summary")[0]
    # Exactly the events summarized: no control, no partial event.
    assert summary.source_event_ids == ("u1", "m1", "u2", "t1", "r1", "m2", "u3", "m3")
    assert (summary.event_time_start, summary.event_time_end) == (T, T + DAY + 5)
    assert "parrot" in summary.text.lower() and summary.topics
    assert "I moved to Madrid in March." in summary.key_facts

    facts = [(r.text, r.source_event_ids, r.event_time_start) for r in by_kind(records, "fact")]
    assert facts == [
        ("I'm thinking about getting a pet parrot.", ("u1",), T),
        ("I really like African Grey parrots because they can talk.", ("u2",), T + 20),
        ("My apartment is small though.", ("u2",), T + 20),
        ("I moved to Madrid in March.", ("u3",), T + DAY),
        ("My daughter's name is Ana.", ("u3",), T + DAY),
    ]
    # Tool events join the window of the message they led to; no control/partial.
    assert [r.source_event_ids for r in by_kind(records, "chunk")] == [
        ("u1", "m1"),
        ("u2", "t1", "r1", "m2"),
        ("u3", "m3"),
    ]
    for r in records:
        assert (r.app_name, r.user_id, r.session_id) == ("bird-chat", "maya", "s1")
        assert r.created_at == NOW and r.expires_at is None and r.embedding is None


def test_chunk_text_is_dated_and_names_the_speaker() -> None:
    chunks = by_kind(
        distill_session(
            make_session(parrot_events()),
            ExtractiveSummarizer(),
            chunk_turns=2,
            chunk_overlap=0,
            now=NOW,
        ),
        "chunk",
    )
    assert chunks[0].text == (
        "[2026-01-05] user: I'm thinking about getting a pet parrot. What should I know?\n"
        "[2026-01-05] travel_agent: Parrots are intelligent, social birds that need daily "
        "attention, a large cage and a varied diet."
    )
    lines = chunks[1].text.splitlines()
    assert lines[1] == "[2026-01-05] travel_agent: called search_birds(size=small)"
    assert lines[2] == '[2026-01-05] search_birds returned {"birds": ["budgie", "cockatiel"]}'
    assert chunks[2].text.startswith("[2026-01-06] user: I moved to Madrid")
    assert (chunks[2].event_time_start, chunks[2].event_time_end) == (T + DAY, T + DAY + 5)


def test_key_expansion_changes_only_the_key_text() -> None:
    session = make_session(parrot_events())
    plain = distill_session(
        session, ExtractiveSummarizer(), chunk_turns=2, chunk_overlap=0, expand_keys=False, now=NOW
    )
    expanded = distill_session(
        session, ExtractiveSummarizer(), chunk_turns=2, chunk_overlap=0, now=NOW
    )
    assert [r.memory_id for r in plain] == [r.memory_id for r in expanded]
    assert [r.text for r in plain] == [r.text for r in expanded]
    assert all(r.key_text == r.text for r in plain)
    last = by_kind(expanded, "chunk")[2]
    # The key: the window's lines with the date named once (not on every line), then
    # what expansion adds.
    lines = last.text.splitlines()
    keyed = "\n".join([lines[0], *(ln.split("] ", 1)[1] for ln in lines[1:])])
    assert last.key_text.startswith(keyed + "\n")
    extra = last.key_text[len(keyed) :]
    # Its facts are quoted from its own words: the key does not repeat them
    # (a fact in other words is appended: tests/memory/recall/test_axes.py).
    assert "I moved to Madrid in March." in last.text and "Facts:" not in extra
    assert "Madrid" in last.entities and "Ana" in last.entities
    assert last.key_facts == ("I moved to Madrid in March.", "My daughter's name is Ana.")
    # Facts from other chunks are not attached to this one.
    assert "parrot" not in extra.split("Topics:")[0]


def test_compaction_summaries_are_reused_not_resummarized() -> None:
    store = InMemorySessionStore()
    session = store.create_session("bird-chat", "maya", "s1")
    events = [e for e in parrot_events() if e.id not in ("ctl", "p1")]
    for e in events:
        store.append_event(session, e)
    summarizer = CountingSummarizer()
    config = CompactionConfig(interval=2, overlap=0, keep_last=1)  # i3 stays raw
    compaction = Compactor(summarizer, config).maybe_compact(store, session)
    assert compaction is not None
    covered = compaction.data["source_event_ids"]
    assert covered == ["u1", "m1", "u2", "t1", "r1", "m2"]

    summarizer.calls.clear()
    records = distill_session(
        store.get_session("bird-chat", "maya", "s1"),
        summarizer,
        chunk_turns=2,
        chunk_overlap=0,
        now=NOW,
    )
    assert len(summarizer.calls) == 1
    assert not set(covered) & set(summarizer.seen_ids)  # never asked again
    assert [i for i in summarizer.seen_ids if "#" not in i] == ["u3", "m3"]
    stand_ins = [e for e in summarizer.calls[0] if "#" in e.id]
    assert stand_ins and all(e.id.startswith(compaction.id + "#") for e in stand_ins)
    assert {e.role for e in stand_ins} >= {"user", "model"}  # "User: ..." lines keep roles

    summary = by_kind(records, "session_summary")[0]
    assert summary.source_event_ids == ("u1", "m1", "u2", "t1", "r1", "m2", "u3", "m3")
    reused = by_kind(records, "compaction_summary")
    assert len(reused) == 1
    assert reused[0].text == compaction.text
    assert reused[0].source_event_ids == tuple(covered)
    assert (reused[0].event_time_start, reused[0].event_time_end) == (T, T + 30)
    assert reused[0].key_facts == tuple(f["text"] for f in compaction.data["summary"]["key_facts"])
    # Facts of the compaction come back with their own provenance, once each.
    facts = [(r.text, r.source_event_ids) for r in by_kind(records, "fact")]
    assert facts == [
        ("I'm thinking about getting a pet parrot.", ("u1",)),
        ("I really like African Grey parrots because they can talk.", ("u2",)),
        ("My apartment is small though.", ("u2",)),
        ("I moved to Madrid in March.", ("u3",)),
        ("My daughter's name is Ana.", ("u3",)),
    ]
    # Raw turns stay searchable, compacted or not.
    assert [r.source_event_ids for r in by_kind(records, "chunk")] == [
        ("u1", "m1"),
        ("u2", "t1", "r1", "m2"),
        ("u3", "m3"),
    ]


def test_adk_style_compaction_covers_its_time_range() -> None:
    events = [e for e in parrot_events() if e.id not in ("ctl", "p1")]
    text = "The user wants a small talking parrot for a small apartment."
    compaction = Event(
        author="adk",
        role="model",
        type="compaction",
        text=text,
        data={"start_ts": T, "end_ts": T + 30, "summary": text},
        id="k1",
        timestamp=T + 40,
    )
    session = make_session([*events[:6], compaction, *events[6:]])
    summarizer = CountingSummarizer()
    records = distill_session(session, summarizer, now=NOW)
    assert summarizer.seen_ids == ["k1#0", "u3", "m3"]
    assert summarizer.calls[0][0].text == text and summarizer.calls[0][0].role == "model"
    reused = by_kind(records, "compaction_summary")[0]
    assert reused.source_event_ids == ("u1", "m1", "u2", "t1", "r1", "m2")
    assert by_kind(records, "session_summary")[0].source_event_ids[:6] == reused.source_event_ids


def test_overlapping_compactions_feed_the_summary_once() -> None:
    events = [e for e in parrot_events() if e.id not in ("ctl", "p1")]

    def compaction(cid: str, ids: list[str], text: str, ts: float) -> Event:
        return Event(
            author="compactor",
            role="system",
            type="compaction",
            text=text,
            data={
                "start_ts": T,
                "end_ts": T + 30,
                "source_event_ids": ids,
                "summary": {"summary": text},
            },
            id=cid,
            timestamp=ts,
        )

    first = compaction("k1", ["u1", "m1"], "User: I'm thinking about a parrot.", T + 11)
    wider = compaction(
        "k2",
        ["u1", "m1", "u2", "t1", "r1", "m2"],
        "User: I'm thinking about a parrot. I like African Greys.",
        T + 31,
    )
    session = make_session([*events[:2], first, *events[2:6], wider, *events[6:]])
    summarizer = CountingSummarizer()
    records = distill_session(session, summarizer, now=NOW)
    assert [i for i in summarizer.seen_ids if i.startswith("k1")] == []  # subsumed by k2
    assert [r.source_event_ids for r in by_kind(records, "compaction_summary")] == [
        ("u1", "m1"),
        ("u1", "m1", "u2", "t1", "r1", "m2"),
    ]


def test_deterministic_and_idempotent() -> None:
    a = distill_session(make_session(parrot_events()), ExtractiveSummarizer(), now=NOW)
    b = distill_session(make_session(parrot_events()), ExtractiveSummarizer(), now=NOW)
    assert a == b
    assert [r.key_text for r in a] == [r.key_text for r in b]
    # Identity does not depend on when it was distilled.
    c = distill_session(make_session(parrot_events()), ExtractiveSummarizer())
    assert [r.content_hash for r in a] == [r.content_hash for r in c]
    assert len({r.memory_id for r in a}) == len(a)


def test_full_chunks_survive_a_growing_session() -> None:
    events = parrot_events()
    early = distill_session(
        make_session(events[:6]), ExtractiveSummarizer(), chunk_turns=2, now=NOW
    )
    late = distill_session(make_session(events), ExtractiveSummarizer(), chunk_turns=2, now=NOW)
    early_chunks = {r.memory_id for r in by_kind(early, "chunk")}
    late_chunks = {r.memory_id for r in by_kind(late, "chunk")}
    assert early_chunks <= late_chunks  # re-ingestion adds the new window only
    assert (
        by_kind(early, "session_summary")[0].memory_id
        != by_kind(late, "session_summary")[0].memory_id
    )  # superseded, for ingest to replace


def test_trailing_tool_events_form_their_own_window_once_the_last_is_full() -> None:
    events = parrot_events()[:3] + [
        tool_call(AGENT, "search_birds", {"size": "small"}, call_id="c9", id="t9", timestamp=T + 50)
    ]
    chunks = by_kind(
        distill_session(make_session(events), ExtractiveSummarizer(), chunk_turns=1, now=NOW),
        "chunk",
    )
    assert [c.source_event_ids for c in chunks] == [("u1",), ("m1",), ("u2",), ("t9",)]
    chunks = by_kind(
        distill_session(make_session(events), ExtractiveSummarizer(), chunk_turns=4, now=NOW),
        "chunk",
    )
    assert [c.source_event_ids for c in chunks] == [("u1", "m1", "u2", "t9")]


def test_empty_and_textless_sessions() -> None:
    assert distill_session(make_session([]), ExtractiveSummarizer(), now=NOW) == []
    control = Event(author=AGENT, role="system", type="control", data={"a": 1}, id="x", timestamp=T)
    assert distill_session(make_session([control]), ExtractiveSummarizer(), now=NOW) == []
    tools = [
        tool_call(AGENT, "ping", {}, call_id="c", id="t", timestamp=T),
        tool_result("ping", "ping", "pong", call_id="c", id="r", timestamp=T + 1),
    ]
    summarizer = CountingSummarizer()
    records = distill_session(make_session(tools), summarizer, now=NOW)
    assert [r.kind for r in records] == ["chunk"] and summarizer.calls == []
    assert records[0].text == (
        "[2026-01-05] travel_agent: called ping()\n[2026-01-05] ping returned pong"
    )


def test_ttl_sets_expiry() -> None:
    records = distill_session(
        make_session(parrot_events()), ExtractiveSummarizer(), ttl_s=3600, now=NOW
    )
    assert records and all(r.expires_at == NOW + 3600 for r in records)
    assert all(r.expired(NOW + 3601) and not r.expired(NOW + 1) for r in records)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"chunk_turns": 0}, "chunk_turns"),
        ({"ttl_s": 0}, "ttl_s"),
        ({"ttl_s": -5.0}, "ttl_s"),
    ],
)
def test_bad_options(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        distill_session(make_session(parrot_events()), ExtractiveSummarizer(), **kwargs)


# -- chunks within the embedder's window ------------------------------------------------
LONG_ANSWER = " ".join(
    f"Step {i}: water the {plant} every {i + 2} days and keep it out of the afternoon sun."
    for i, plant in enumerate(["fern", "basil", "orchid", "cactus", "ivy", "mint", "rose"] * 3)
)


def long_answer_session() -> Session:
    return make_session(
        [
            user_message("How do I care for my plants?", id="u1", timestamp=T),
            model_message(AGENT, LONG_ANSWER, id="m1", timestamp=T + 5),
            user_message("Thanks! I also grow tomatoes on my balcony.", id="u2", timestamp=T + 60),
            model_message(AGENT, "Tomatoes love sun.", id="m2", timestamp=T + 65),
        ]
    )


def test_no_chunk_is_longer_than_its_token_cap_and_each_turn_is_in_one() -> None:
    from mnemoray.profiles.turns import read_turns
    from mnemoray.tokens import count_tokens

    records = distill_session(long_answer_session(), ExtractiveSummarizer(), now=NOW)
    chunks = by_kind(records, "chunk")
    assert all(count_tokens(c.text) <= 128 for c in chunks), [count_tokens(c.text) for c in chunks]
    # The long answer is cut at sentence ends into parts of about equal length, each
    # saying which part it is; together they are the answer, word for word.
    parts = [c for c in chunks if f"{AGENT} (part " in c.text]
    assert len(parts) >= 3 and all("m1" in c.source_event_ids for c in parts)
    lines = [
        line.split(": ", 1)[1] for c in parts for line in c.text.split("\n") if "(part " in line
    ]
    sizes = [count_tokens(line) for line in lines]
    assert max(sizes) - min(sizes) <= 40
    assert " ".join(lines).split() == LONG_ANSWER.split()
    assert all(line.rstrip().endswith(".") for line in lines)
    # Every turn is in exactly one chunk (no overlap by default).
    held = [e for c in chunks for e in c.source_event_ids if e != "m1"]
    assert sorted(held) == ["m2", "u1", "u2"]
    # Reading the turns back joins the parts in order.
    (turns,) = read_turns(records).values()
    assert [t.event_id for t in turns] == ["u1", "m1", "u2", "m2"]
    assert turns[1].text.split() == LONG_ANSWER.split()
    assert len(turns[1].memory_ids) == len(parts)
    # Without a cap, the windows are as many turns as asked.
    whole = by_kind(
        distill_session(long_answer_session(), ExtractiveSummarizer(), chunk_tokens=None, now=NOW),
        "chunk",
    )
    assert [c.source_event_ids for c in whole] == [("u1", "m1", "u2", "m2")]
    with pytest.raises(InvalidInput, match="chunk_tokens"):
        distill_session(long_answer_session(), ExtractiveSummarizer(), chunk_tokens=8)


def test_windows_before_the_last_do_not_change_as_the_session_grows() -> None:
    session = long_answer_session()
    before = {
        c.memory_id for c in by_kind(distill_session(session, None, summarize=False), "chunk")
    }
    session.apply(user_message("One more: how often for the ivy?", id="u3", timestamp=T + 90))
    after = by_kind(distill_session(session, None, summarize=False), "chunk")
    # Only the last window may differ; every earlier one is the same record.
    assert {c.memory_id for c in after[:-1]} <= before


def test_heavy_tool_traffic_gets_a_window_of_its_own() -> None:
    events = [
        tool_call(
            AGENT,
            "search_flights",
            {"date": f"May {i}", "origin": "Kyoto"},
            id=f"c{i}",
            timestamp=T + i,
        )
        for i in range(6)
    ]
    events.append(model_message(AGENT, "I found three flights for you.", id="m1", timestamp=T + 9))
    chunks = by_kind(distill_session(make_session(events), None, summarize=False), "chunk")
    from mnemoray.tokens import count_tokens  # noqa: PLC0415

    assert all(count_tokens(c.text) <= 128 for c in chunks)
    # The reply is whole, in a window after the tool calls.
    assert [c for c in chunks if "(part " in c.text] == []
    assert chunks[-1].text.endswith("I found three flights for you.")


def test_a_fact_keys_with_the_person_who_said_it() -> None:
    # Two people who both say "I": a question asks by name whose fact it is.
    records = distill_session(
        make_session(
            [
                user_message(
                    "I just finished reading Circe.", author="Katherine", id="k1", timestamp=T
                ),
                user_message(
                    "I signed up for a pottery class.", author="Benjamin", id="b1", timestamp=T + 60
                ),
                user_message("I moved to Porto last year.", id="u1", timestamp=T + 120),
            ]
        ),
        ExtractiveSummarizer(),
        now=NOW,
    )
    keys = {f.text: f.key_text for f in by_kind(records, "fact")}
    assert keys["I just finished reading Circe."] == "Katherine: I just finished reading Circe."
    assert keys["I signed up for a pottery class."].startswith("Benjamin: ")
    # The user's own fact keys as its words: no name to add.
    assert keys["I moved to Porto last year."] in ("", "I moved to Porto last year.")


def test_a_fact_and_a_chunk_name_the_entities_they_hold_and_no_month() -> None:
    records = distill_session(
        make_session(
            [
                user_message(
                    "I adopted a parrot named Kiwi, an African Grey.", id="u1", timestamp=T
                ),
                model_message(AGENT, "Congratulations!", id="m1", timestamp=T + 10),
                user_message("I am planning a trip to Lisbon in May.", id="u2", timestamp=T + 20),
            ]
        ),
        ExtractiveSummarizer(),
        now=NOW,
    )
    facts = {f.text: f.entities for f in by_kind(records, "fact")}
    assert facts["I adopted a parrot named Kiwi, an African Grey."] == ("Kiwi", "African Grey")
    assert facts["I am planning a trip to Lisbon in May."] == ("Lisbon",)
    # A month is a date, not a name, in every record.
    assert all("May" not in r.entities for r in records)
