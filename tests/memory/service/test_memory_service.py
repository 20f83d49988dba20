"""MemoryService end to end with the real MiniLM embedder and the extractive summarizer.

Includes the seed-003 case: a paraphrased query ("that flying animal") finds
the parrot conversation in hybrid mode, and keyword search does not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.backfill.archive import write_archive
from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.embedders import open_embedder
from mnemoray.errors import StoreError
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.records.filters import RetrievalError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.sessions.events import user_message
from mnemoray.sessions.session import Session
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import DAY, FLYING, T0, parrot, session


@pytest.fixture(scope="module")
def embedder():
    return open_embedder("default")  # loaded once for the module (and cached per process)


@pytest.fixture
def service(tmp_path, embedder) -> MemoryService:
    return MemoryService(MemoryStore(tmp_path / "store"), embedder, ExtractiveSummarizer())


def unrelated(user: str = "alice") -> list[Session]:
    return [
        session(
            "cooking",
            T0 + 3 * DAY,
            ("u", "How long should I roast a whole chicken? I like crispy skin."),
            ("m", "Roast it at 220C for about 75 minutes and dry the skin well first."),
            ("u", "I usually cook dinner for four people on Sundays."),
            user=user,
        ),
        session(
            "taxes",
            T0 + 6 * DAY,
            ("u", "When is the deadline for filing my income tax return? I'm self-employed."),
            (
                "m",
                "For most self-employed people the annual return is due in the spring; "
                "quarterly estimates are due four times a year.",
            ),
            user=user,
        ),
        session(
            "running",
            T0 + 9 * DAY,
            (
                "u",
                "I'm training for a half marathon in October. How many kilometers per "
                "week should I run?",
            ),
            ("m", "Build up to 30-40 km per week with one long run."),
            ("u", "I run in the mornings before work."),
            user=user,
        ),
    ]


def sessions_of(results) -> list[str]:
    return [r.memory.session_id for r in results]


# -- a paraphrased query -----------------------------------------------------------
def test_paraphrased_recall_hybrid_finds_parrot_keyword_does_not(
    tmp_path, service, embedder
) -> None:
    for s in [parrot(), *unrelated()]:
        assert service.add_session(s)
    hybrid = service.search("app", "alice", FLYING, top_k=5)
    assert hybrid and hybrid[0].memory.session_id == "parrot"
    assert hybrid[0].signals["dense_rank"] == 1 and hybrid[0].signals["bm25"] == 0.0
    assert hybrid[0].memory.event_time_start == T0  # provenance: when it was said
    keyword = service.search("app", "alice", FLYING, top_k=5, mode="keyword")
    assert not keyword or keyword[0].memory.session_id != "parrot"
    # A keyword-only configuration (no embedder at all) does not find it first either.
    kw_service = MemoryService.open(tmp_path / "kw", embedder=None)
    for s in [parrot(), *unrelated()]:
        kw_service.add_session(s)
    assert kw_service.store.manifest().keyword_only
    kw = kw_service.search("app", "alice", FLYING, top_k=5)
    assert not kw or kw[0].memory.session_id != "parrot"
    # ...while a lexical query still works there.
    assert (
        kw_service.search("app", "alice", "African Grey parrots")[0].memory.session_id == "parrot"
    )


def test_tenant_isolation_absolute(service) -> None:
    service.add_session(parrot())
    for s in unrelated():
        service.add_session(s)
    service.add_session(parrot(user="bob", sid="bob-parrot"))
    service.add_session(parrot(user="alice", sid="other-app-parrot", app="other"))
    filters = [
        None,
        {"session_id": "bob-parrot"},
        {"kinds": ["fact", "chunk"]},
        {"after": T0 - DAY, "before": T0 + DAY},
        {"session_id": "parrot"},
    ]
    for mode in ("hybrid", "dense", "keyword"):
        for flt in filters:
            for query in (FLYING, "African Grey parrot", "bob"):
                got = service.search("app", "alice", query, top_k=50, filters=flt, mode=mode)
                assert {(r.memory.app_name, r.memory.user_id) for r in got} <= {("app", "alice")}
    assert service.search("app", "alice", "parrot", filters={"session_id": "bob-parrot"}) == []
    assert service.search("app", "nobody", "parrot") == []
    app_wide = service.search_app("app", "African Grey parrot", top_k=20)
    assert {r.memory.user_id for r in app_wide} == {"alice", "bob"}
    assert {r.memory.app_name for r in app_wide} == {"app"}
    other = service.search_app("other", "parrot", top_k=20)
    assert other and {r.memory.session_id for r in other} == {"other-app-parrot"}


def test_facts_that_change_over_time(service) -> None:
    service.add_session(parrot())
    service.add_session(
        session(
            "berlin",
            T0 + 12 * DAY,
            ("u", "I live in Berlin."),
            ("m", "Berlin is a great city! How can I help?"),
        )
    )
    service.add_session(
        session(
            "madrid",
            T0 + 40 * DAY,
            ("u", "I moved to Madrid."),
            ("m", "Congratulations on the move! How are you settling in?"),
        )
    )
    # Validity, not recency, orders them (the default recency is a near-tie breaker
    # only, window 0.05): the question asks how things are, so the move to Madrid (the
    # fact that holds) comes first and the closed Berlin fact, the closer match in words,
    # still comes back, marked stale by the graph.
    got = service.search("app", "alice", "where do I live", top_k=5)
    assert got[0].memory.session_id == "madrid" and got[0].signals["graph"] == 1.0
    assert got[0].signals["recency"] == 0.0
    berlin = [r for r in got if r.memory.session_id == "berlin"]
    assert berlin and all(r.signals["graph"] < 0 for r in berlin)
    # A recency-first deployment (wider window, larger weight) puts the newer fact first,
    # while dense ranking alone keeps the stale one first: recency is what changes it.
    recency_first = MemoryService(
        service.store,
        service.embedder,
        service.summarizer,
        RetrievalConfig(weights={"recency": 0.25}, recency_window=0.15),
    )
    first = recency_first.search("app", "alice", "where do I live", top_k=5)
    assert first[0].memory.session_id == "madrid", [(r.memory.text, r.signals) for r in first]
    assert first[0].signals["recency"] > 0.9
    berlin = next(r for r in first if r.memory.session_id == "berlin")
    assert berlin.signals["dense_rank"] == 1  # Berlin is the closer match; recency decides
    assert (
        service.search("app", "alice", "where do I live", mode="dense")[0].memory.session_id
        == "berlin"
    )


def test_filters_session_time_kinds(service) -> None:
    for s in [parrot(), *unrelated()]:
        service.add_session(s)
    only = service.search("app", "alice", FLYING, top_k=10, filters={"session_id": "taxes"})
    assert only and set(sessions_of(only)) == {"taxes"}
    window = service.search(
        "app",
        "alice",
        FLYING,
        top_k=10,
        filters={"after": T0 + 2 * DAY, "before": "2023-11-21T00:00:00Z"},
    )
    assert set(sessions_of(window)) == {"cooking", "taxes"}
    facts = service.search("app", "alice", FLYING, top_k=10, filters={"kinds": ["fact"]})
    assert facts and {r.memory.kind for r in facts} == {"fact"}
    assert facts[0].memory.session_id == "parrot"
    with pytest.raises(RetrievalError, match="filters.kinds"):
        service.search("app", "alice", FLYING, filters={"kinds": ["note"]})


def test_forget_memory_session_user(service, tmp_path, embedder) -> None:
    for s in [parrot(), *unrelated()]:
        service.add_session(s)
    top = service.search("app", "alice", FLYING, top_k=1)[0]
    assert service.forget_memory("app", "bob", top.memory.memory_id) == 0  # not bob's
    assert service.forget_memory("app", "alice", top.memory.memory_id) == 1
    assert top.memory.memory_id not in {
        r.memory.memory_id for r in service.search("app", "alice", FLYING, top_k=50)
    }
    assert service.forget_session("app", "alice", "parrot") > 0
    for mode in ("hybrid", "dense", "keyword"):
        got = service.search("app", "alice", "African Grey parrot", top_k=50, mode=mode)
        assert "parrot" not in sessions_of(got)
    # A fresh service over the same directory agrees (forgetting survives reloads).
    again = MemoryService(MemoryStore(tmp_path / "store"), embedder, ExtractiveSummarizer())
    assert "parrot" not in sessions_of(again.search("app", "alice", FLYING, top_k=50))
    assert service.forget_user("app", "alice") > 0
    assert service.search("app", "alice", FLYING, top_k=50) == []
    assert again.search("app", "alice", "taxes", top_k=50) == []


def test_ttl(tmp_path, embedder) -> None:
    svc = MemoryService(MemoryStore(tmp_path / "ttl"), embedder, ExtractiveSummarizer(), ttl_s=3600)
    written = svc.add_session(parrot())
    assert written and all(m.expires_at and m.expires_at > time.time() + 3000 for m in written)
    now = time.time()
    svc.add_memories(
        [
            Memory(
                "app", "alice", "notes", "fact", "My parrot is called Kiwi.", expires_at=now - 1
            ),
            Memory(
                "app",
                "alice",
                "notes",
                "fact",
                "My parrot eats sunflower seeds.",
                expires_at=now + 3600,
            ),
        ]
    )
    texts = [r.memory.text for r in svc.search("app", "alice", "my parrot", top_k=50)]
    assert "My parrot eats sunflower seeds." in texts
    assert "My parrot is called Kiwi." not in texts  # expired: never returned
    assert svc.snapshot().count("app", "alice") == len(written) + 1


def test_grown_session_keeps_one_current_summary_and_ledger_skips(service) -> None:
    short = session(
        "trip",
        T0,
        ("u", "I'm planning a trip to Lisbon in May."),
        ("m", "Lisbon in May is lovely."),
    )
    first = service.add_session(short)
    assert {m.kind for m in first} >= {"session_summary", "fact", "chunk"}
    assert service.add_session(short) == []  # same content: ledger says done
    grown = session(
        "trip",
        T0,
        ("u", "I'm planning a trip to Lisbon in May."),
        ("m", "Lisbon in May is lovely."),
        ("u", "I prefer small boutique hotels near the river."),
        ("m", "Alfama has several."),
        ("u", "My budget is 150 euros per night."),
        ("m", "Noted."),
    )
    added = service.add_session(grown)
    assert added and len(added) < len(first) + 10
    live = list(service.snapshot().iter_memories("app", "alice"))
    summaries = [m for m in live if m.kind == "session_summary"]
    assert len(summaries) == 1 and "boutique" in summaries[0].text
    chunk_ids = [tuple(m.source_event_ids) for m in live if m.kind == "chunk"]
    # The first full window stays as it was; the grown last window replaced the partial one.
    assert ("trip-e0", "trip-e1", "trip-e2", "trip-e3") in chunk_ids
    assert ("trip-e0", "trip-e1") not in chunk_ids
    assert len({m.content_hash for m in live}) == len(live)
    facts = {m.text for m in live if m.kind == "fact"}
    assert "I prefer small boutique hotels near the river." in facts


def test_writes_visible_to_another_service_immediately(tmp_path, embedder) -> None:
    reader = MemoryService.open(tmp_path / "shared", embedder=embedder)
    assert reader.search("app", "alice", FLYING) == []
    writer = MemoryService.open(tmp_path / "shared", embedder=embedder)
    writer.add_session(parrot())
    assert reader.search("app", "alice", FLYING)[0].memory.session_id == "parrot"


def test_memory_search_hook_and_load_memory_tool(service) -> None:
    for s in [parrot(), *unrelated()]:
        service.add_session(s)
    live = Session("app", "alice", "new")
    live.apply(user_message(FLYING))
    req = Compiler.default().compile(
        live,
        AgentSpec(
            name="helper",
            static_instruction="Be kind.",
            memory_preload=True,
            preload_top_k=2,
            memory_tools=["load_memory"],
        ),
        services=Services(memory_search=service.memory_search()),
    )
    block = req.contents[-2].text  # just before the last user message (the default)
    assert block.startswith("<memory>") and req.contents[-1].text == FLYING
    assert "parrot" in block.lower() and "session parrot" in block and "2023-11-14" in block
    assert any(t["name"] == "load_memory" for t in req.tools)
    tool = service.load_memory("app", "alice", FLYING, top_k=3)
    assert len(tool) == 3 and tool[0]["provenance"]["session_id"] == "parrot"
    assert tool[0]["date"].startswith("2023-11-14")
    json.dumps(tool)  # JSON-ready


def test_add_memories_and_model_checks(service, tmp_path) -> None:
    added = service.add_memories(
        [Memory("app", "carol", "manual", "fact", "Carol is allergic to peanuts.")]
    )
    assert added[0].embedding is not None and added[0].embedding.shape == (384,)
    assert (
        service.search("app", "carol", "food allergies")[0].memory.text
        == "Carol is allergic to peanuts."
    )
    with pytest.raises(TypeError, match="memories\\[0\\]"):
        service.add_memories(["not a memory"])  # type: ignore[list-item]
    # A store written with MiniLM refuses another model, and keyword-only writers.
    with pytest.raises(StoreError, match="embeds with"):
        MemoryService(service.store, None, ExtractiveSummarizer()).add_memories(
            [Memory("app", "carol", "m", "fact", "x")]
        )
    # "default" on an existing store means the store's own model.
    reopened = MemoryService.open(tmp_path / "store")
    assert reopened.embedder is not None and reopened.embedder.model_id == service.embedder.model_id


def test_backfill_idempotent_with_quarantine(tmp_path: Path, embedder) -> None:
    archive = tmp_path / "archive"
    write_archive([parrot(), *unrelated()], archive / "part-0.jsonl")
    good_line = (archive / "part-0.jsonl").read_text().splitlines()[0]
    bad = json.loads(good_line)
    bad["events"][0]["role"] = "robot"
    (archive / "part-1.jsonl").write_text(
        "{not json\n" + json.dumps(bad) + "\n" + json.dumps({"user_id": "x"}) + "\n"
    )
    store_dir = tmp_path / "bf"
    report = backfill(
        BackfillConfig(archive, store_dir, shards=2, embedder=embedder, commit_every=2)
    )
    assert (report.sessions_read, report.skipped, report.quarantined) == (7, 0, 3)
    assert report.memories_written > 8 and report.seconds >= 0
    store = MemoryStore(store_dir)
    q = store.read_quarantine()
    assert len(q) == 3 and {r["location"] for r in q} == {
        "part-1.jsonl:1",
        "part-1.jsonl:2",
        "part-1.jsonl:3",
    }
    assert any("events[0].role" in r["reason"] for r in q)
    rows = store.load().count()
    again = backfill(BackfillConfig(archive, store_dir, embedder=embedder))
    assert (again.sessions_read, again.skipped, again.quarantined, again.memories_written) == (
        7,
        4,
        3,
        0,
    )
    assert store.load().count() == rows and store.quarantine_count() == 3
    svc = MemoryService.open(store_dir, embedder=embedder)
    assert svc.search("app", "alice", FLYING)[0].memory.session_id == "parrot"


def test_backfill_of_a_grown_session_keeps_one_summary(tmp_path: Path) -> None:
    turns = [
        ("u", "I'm planning a trip to Lisbon in May."),
        ("m", "Lisbon in May is lovely."),
        ("u", "I prefer small boutique hotels near the river."),
        ("m", "Alfama has some."),
    ]
    write_archive([session("trip", T0, *turns[:2])], tmp_path / "v1.jsonl")
    write_archive([session("trip", T0, *turns)], tmp_path / "v2.jsonl")
    store_dir = tmp_path / "kw"
    first = backfill(BackfillConfig(tmp_path / "v1.jsonl", store_dir, embedder=None))
    second = backfill(BackfillConfig(tmp_path / "v2.jsonl", store_dir, embedder=None))
    assert first.memories_written and second.memories_written and second.skipped == 0
    live = list(MemoryStore(store_dir).load().iter_memories("app", "alice"))
    summaries = [m for m in live if m.kind == "session_summary"]
    assert len(summaries) == 1 and "boutique" in summaries[0].text
    assert [tuple(m.source_event_ids) for m in live if m.kind == "chunk"] == [
        ("trip-e0", "trip-e1", "trip-e2", "trip-e3")
    ]


def test_no_signal_lifts_a_record_without_evidence_for_the_query(service) -> None:
    # Keyword mode: only what matches the word comes back (no graph hop, no shared
    # period, no recency brings an unrelated session in on its own).
    for s in [parrot(), *unrelated()]:
        service.add_session(s)
    got = service.search("app", "alice", "parrot", top_k=10, mode="keyword")
    assert got and all(r.signals["bm25"] > 0 for r in got)
    assert {r.memory.session_id for r in got} == {"parrot"}
    # The fact ranked first is shown as the chunk of its turn, and the summary that
    # repeats it stays only if it says more than the chunk.
    assert got[0].memory.kind == "chunk" and got[0].in_place_of is not None
