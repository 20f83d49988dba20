"""Memory hygiene in process: forget reasons, corrections with versions, forget by
query (preview + confirm), open threads and decisions/commitments on records, and
old stores still opening.

Hooks and the webhook: tests/test_memory_hooks.py; HTTP and CLI cases:
tests/test_memory_hygiene_http.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow.parquet as pq
import pytest
from factories import T0, parrot, session

from mnemoray.embedders import open_embedder
from mnemoray.errors import InvalidInput, NotFound
from mnemoray.events import Event, user_message
from mnemoray.memory.compact import compact_store
from mnemoray.memory.layout import parquet_path
from mnemoray.memory.record import Memory
from mnemoray.memory.segment import OPTIONAL_FIELDS
from mnemoray.memory.service import MemoryService
from mnemoray.memory.store import MemoryStore
from mnemoray.memory.tombstones import Tombstone
from mnemoray.summarizers import ExtractiveSummarizer
from mnemoray.summarizers.base import Summarizer, Summary


@pytest.fixture(scope="module")
def embedder():
    return open_embedder("default")


@pytest.fixture
def service(tmp_path) -> MemoryService:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    yield svc
    svc.close()


def facts(memories: Sequence[Memory]) -> list[Memory]:
    return [m for m in memories if m.kind == "fact"]


def live_ids(svc: MemoryService, user: str = "alice") -> set[str]:
    return {m.memory_id for m in svc.snapshot().rows_for_user("app", user)}


# -- forget reasons ---------------------------------------------------------------------
def test_forget_reasons_are_kept_listed_and_scoped_to_the_owner(service) -> None:
    mine = service.add_session(parrot())
    theirs = service.add_session(parrot(user="bob"))
    same_id = mine[0].memory_id
    assert service.forget_memory("app", "alice", same_id, reason="user asked", actor="cli:a") == 1
    assert service.forget_session("app", "bob", "parrot", reason="evicted: oldest",
                                  actor="policy") == len(theirs)
    [record] = service.forgotten("app", "alice")
    assert (record["scope"], record["memory_id"], record["reason"], record["actor"]) == \
        ("memory", same_id, "user asked", "cli:a")
    [bobs] = service.forgotten("app", "bob")
    assert (bobs["scope"], bobs["session_id"], bobs["reason"]) == \
        ("session", "parrot", "evicted: oldest")
    assert service.forgotten("app", "carol") == []
    # Another user's memory is never forgotten through an id of its owner's namesake.
    assert service.forget_memory("app", "carol", same_id, reason="x") == 0


def test_tombstones_written_before_reasons_still_load() -> None:
    old = {"scope": "memory", "version": 3, "at": T0, "memory_id": "m", "app_name": "app",
           "user_id": "alice", "session_id": "s"}
    t = Tombstone.from_dict(old)
    assert (t.reason, t.actor) == ("", "") and t.owned_by("app", "alice")


# -- corrections ------------------------------------------------------------------------
def test_edit_replaces_text_reembeds_and_keeps_versions(tmp_path, embedder) -> None:
    svc = MemoryService(MemoryStore(tmp_path / "store"), embedder, ExtractiveSummarizer())
    fact = facts(svc.add_session(parrot()))[0]
    new = svc.edit_memory("app", "alice", fact.memory_id,
                          "I adopted a cat called Miso instead of a parrot.", actor="cli:ana")
    assert new.memory_id != fact.memory_id and new.edited_by == "cli:ana"
    assert [v.text for v in new.previous_versions] == [fact.text]
    assert live_ids(svc) >= {new.memory_id} and fact.memory_id not in live_ids(svc)
    top = svc.search("app", "alice", "what is the name of my cat", top_k=1, mode="dense")
    assert top[0].memory.memory_id == new.memory_id  # found by its new words' vector
    for asked in (fact.memory_id, new.memory_id):  # the old id still finds it
        out = svc.memory_versions("app", "alice", asked)
        assert out["memory_id"] == new.memory_id
        assert [(v["text"], v["current"]) for v in out["versions"]] == \
            [(fact.text, False), (new.text, True)]
    [record] = svc.forgotten("app", "alice")
    assert record["reason"] == f"edited: now {new.memory_id}" and record["actor"] == "cli:ana"
    assert svc.edit_memory("app", "alice", new.memory_id, new.text) == new  # no change
    back = svc.edit_memory("app", "alice", new.memory_id, fact.text, actor="cli:ana")
    assert back.text == fact.text and len(back.previous_versions) == 2  # not a duplicate
    with pytest.raises(NotFound):
        svc.edit_memory("app", "bob", back.memory_id, "not mine")
    with pytest.raises(NotFound):
        svc.memory_versions("app", "bob", back.memory_id)
    with pytest.raises(InvalidInput) as bad:
        svc.edit_memory("app", "alice", back.memory_id, "  ")
    assert bad.value.field == "text"
    svc.close()


def test_a_correction_survives_its_session_growing(service) -> None:
    fact = facts(service.add_session(parrot()))[0]
    new = service.edit_memory("app", "alice", fact.memory_id, "I now own a cat.", actor="me")
    grown = parrot()
    grown.events.append(user_message("I also like budgies.", timestamp=T0 + 900, id="b1"))
    assert service.ingest_session(grown).status == "added"
    ids = live_ids(service)
    assert new.memory_id in ids and fact.memory_id not in ids  # not re-added, not replaced


# -- forget by query ----------------------------------------------------------------------
def test_forget_by_query_confirms_exactly_what_was_previewed(service) -> None:
    service.add_session(parrot())
    service.add_session(session("cooking", T0 + 9, ("u", "I roast chicken on Sundays."),
                                ("m", "Dry the skin well first.")))
    preview = service.preview_forget("app", "alice", "parrot", top_k=3, mode="keyword")
    assert preview.memory_ids and live_ids(service) >= set(preview.memory_ids)
    assert service.forgotten("app", "alice") == []  # a preview forgets nothing
    late = service.add_memories([Memory("app", "alice", "online", "fact",
                                        "Another note about my parrot.")])
    with pytest.raises(InvalidInput) as other:
        service.confirm_forget("app", "bob", preview.confirm_token)
    assert other.value.field == "confirm"
    body, mac = preview.confirm_token.split(".")
    with pytest.raises(InvalidInput):
        service.confirm_forget("app", "alice", f"{body}x.{mac}")
    with pytest.raises(InvalidInput) as stray:
        service.confirm_forget("app", "alice", preview.confirm_token,
                               memory_ids=[late[0].memory_id])
    assert stray.value.field == "memory_ids[0]"
    out = service.confirm_forget("app", "alice", preview.confirm_token, actor="me")
    assert out == {"forgotten": len(preview.memory_ids), "memory_ids": preview.memory_ids}
    ids = live_ids(service)
    assert not ids & set(preview.memory_ids) and late[0].memory_id in ids
    assert {r["reason"] for r in service.forgotten("app", "alice")} == \
        {"forgotten by query 'parrot'"}
    expired = service.preview_forget("app", "alice", "chicken", mode="keyword", ttl_s=-1)
    with pytest.raises(InvalidInput, match="expired"):
        service.confirm_forget("app", "alice", expired.confirm_token)


# -- open threads, decisions, commitments (seed 004) ------------------------------------
class _Outcomes(Summarizer):
    name = "outcomes"

    def summarize(self, events: Sequence[Event]) -> Summary:
        return Summary("We picked a flight and left the hotel open.", topics=("travel",),
                       open_threads=("Which hotel in Lisbon?",),
                       decisions=("Fly TAP on 3 May",),
                       commitments=("Assistant sends the itinerary by Friday",),
                       source_event_ids=tuple(e.id for e in events))


def test_records_keep_open_threads_decisions_and_commitments(tmp_path) -> None:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, _Outcomes())
    stored = {"summary": "Earlier: budget is 800 EUR.", "decisions": ["Budget 800 EUR"],
              "open_threads": ["Travel insurance?"], "commitments": []}
    trip = session("trip", T0, ("u", "Book me a flight to Lisbon."), ("m", "TAP on 3 May?"),
                   ("u", "Yes. Hotel later."))
    trip.events.insert(0, Event(author="compactor", role="system", type="compaction",
                                text=stored["summary"], timestamp=T0 - 5, id="k1",
                                data={"start_ts": T0 - 60, "end_ts": T0 - 10,
                                      "source_event_ids": ["old"], "summary": stored}))
    svc.add_session(trip)
    by_kind = {m.kind: m for m in svc.snapshot().rows_for_user("app", "alice")}
    summary = by_kind["session_summary"]  # read back from the store
    assert summary.open_threads == ("Which hotel in Lisbon?",)
    assert summary.decisions == ("Fly TAP on 3 May",)
    assert summary.commitments == ("Assistant sends the itinerary by Friday",)
    compaction = by_kind["compaction_summary"]
    assert (compaction.decisions, compaction.open_threads) == \
        (("Budget 800 EUR",), ("Travel insurance?",))
    assert by_kind["chunk"].open_threads == ()
    recalled = {r.memory.kind: r.to_dict() for r in svc.search("app", "alice", "flight hotel",
                                                                top_k=10)}
    assert recalled["session_summary"]["open_threads"] == ["Which hotel in Lisbon?"]
    assert recalled["session_summary"]["commitments"] == [
        "Assistant sends the itinerary by Friday"]
    assert "decisions" not in recalled["chunk"]  # only where a summary had some
    svc.close()


def test_the_extractive_summarizer_finds_plainly_stated_outcomes(service) -> None:
    service.add_session(session(
        "trip", T0, ("u", "Ok, let's go with the TAP flight on 3 May. Which hotel is close?"),
        ("m", "I'll send you three hotels by Friday."),
        ("u", "I might book later. Which area is quiet?")))
    [summary] = [m for m in service.snapshot().rows_for_user("app", "alice")
                 if m.kind == "session_summary"]
    assert summary.decisions == ("user: Ok, let's go with the TAP flight on 3 May.",)
    assert summary.commitments == ("assistant: I'll send you three hotels by Friday.",)
    assert summary.open_threads == ("Unanswered question: Which area is quiet?",)


def test_a_store_written_before_the_new_columns_still_opens_and_compacts(tmp_path) -> None:
    store = MemoryStore(tmp_path / "store", shards=1)
    svc = MemoryService(store, None, ExtractiveSummarizer())
    added = svc.add_session(parrot())
    entry = store.manifest().segments[0][0]
    path = parquet_path(store.root, 0, entry.name)
    old = pq.read_table(path)
    pq.write_table(old.drop_columns([c for c in OPTIONAL_FIELDS if c in old.column_names]),
                   path)  # as an earlier version wrote it
    reopened = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    rows = reopened.snapshot().rows_for_user("app", "alice")
    assert {m.memory_id for m in rows} == {m.memory_id for m in added}
    assert all(m.previous_versions == () and m.edited_by is None and m.open_threads == ()
               for m in rows)
    fact = facts(rows)[0]
    new = reopened.edit_memory("app", "alice", fact.memory_id, "Corrected.", actor="me")
    before = reopened.forgotten("app", "alice")
    assert compact_store(reopened.store).tombstones_retired == 1
    after = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    kept = {m.memory_id: m for m in after.snapshot().rows_for_user("app", "alice")}
    assert fact.memory_id not in kept
    assert kept[new.memory_id].previous_versions[0].text == fact.text
    # The retired forget record keeps its reason, listed once.
    assert after.store.manifest().tombstones == []
    assert after.forgotten("app", "alice") == before and before[0]["actor"] == "me"
    assert after.forgotten("app", "bob") == []
    for s in (svc, reopened, after):
        s.close()
