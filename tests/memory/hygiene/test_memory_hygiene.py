"""Memory hygiene in process: forget reasons, corrections with versions, forget by
query (preview + confirm), open threads and decisions/commitments on records, and
old stores still opening.

Hooks and the webhook: tests/memory/service/test_memory_hooks.py; HTTP and CLI cases:
tests/http/test_memory_hygiene.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow.parquet as pq
import pytest

from mnemoray.embedders import open_embedder
from mnemoray.errors import InvalidInput, NotFound
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import parquet_path
from mnemoray.memory.store.ops.merge import compact_store
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.rows import OPTIONAL_FIELDS
from mnemoray.memory.store.tombstones import Tombstone
from mnemoray.sessions.events import Event, user_message
from mnemoray.summarizers import ExtractiveSummarizer
from mnemoray.summarizers.base import Summarizer, Summary
from tests.support.factories import T0, parrot, session


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
    assert service.forget_session(
        "app", "bob", "parrot", reason="evicted: oldest", actor="policy"
    ) == len(theirs)
    [record] = service.forgotten("app", "alice")
    assert (record["scope"], record["memory_id"], record["reason"], record["actor"]) == (
        "memory",
        same_id,
        "user asked",
        "cli:a",
    )
    [bobs] = service.forgotten("app", "bob")
    assert (bobs["scope"], bobs["session_id"], bobs["reason"]) == (
        "session",
        "parrot",
        "evicted: oldest",
    )
    assert service.forgotten("app", "carol") == []
    # Another user's memory is never forgotten through an id of its owner's namesake.
    assert service.forget_memory("app", "carol", same_id, reason="x") == 0


def test_tombstones_written_before_reasons_still_load() -> None:
    old = {
        "scope": "memory",
        "version": 3,
        "at": T0,
        "memory_id": "m",
        "app_name": "app",
        "user_id": "alice",
        "session_id": "s",
    }
    t = Tombstone.from_dict(old)
    assert (t.reason, t.actor) == ("", "") and t.owned_by("app", "alice")


# -- corrections ------------------------------------------------------------------------
def test_edit_replaces_text_reembeds_and_keeps_versions(tmp_path, embedder) -> None:
    svc = MemoryService(MemoryStore(tmp_path / "store"), embedder, ExtractiveSummarizer())
    fact = facts(svc.add_session(parrot()))[0]
    new = svc.edit_memory(
        "app",
        "alice",
        fact.memory_id,
        "I adopted a cat called Miso instead of a parrot.",
        actor="cli:ana",
    )
    assert new.memory_id != fact.memory_id and new.edited_by == "cli:ana"
    assert [v.text for v in new.previous_versions] == [fact.text]
    assert live_ids(svc) >= {new.memory_id} and fact.memory_id not in live_ids(svc)
    top = svc.search("app", "alice", "what is the name of my cat", top_k=1, mode="dense")
    assert top[0].memory.memory_id == new.memory_id  # found by its new words' vector
    for asked in (fact.memory_id, new.memory_id):  # the old id still finds it
        out = svc.memory_versions("app", "alice", asked)
        assert out["memory_id"] == new.memory_id
        assert [(v["text"], v["current"]) for v in out["versions"]] == [
            (fact.text, False),
            (new.text, True),
        ]
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
    service.add_session(
        session(
            "cooking",
            T0 + 9,
            ("u", "I roast chicken on Sundays."),
            ("m", "Dry the skin well first."),
        )
    )
    preview = service.preview_forget("app", "alice", "parrot", top_k=3, mode="keyword")
    assert preview.memory_ids and live_ids(service) >= set(preview.memory_ids)
    assert service.forgotten("app", "alice") == []  # a preview forgets nothing
    late = service.add_memories(
        [Memory("app", "alice", "online", "fact", "Another note about my parrot.")]
    )
    with pytest.raises(InvalidInput) as other:
        service.confirm_forget("app", "bob", preview.confirm_token)
    assert other.value.field == "confirm"
    body, mac = preview.confirm_token.split(".")
    with pytest.raises(InvalidInput):
        service.confirm_forget("app", "alice", f"{body}x.{mac}")
    with pytest.raises(InvalidInput) as stray:
        service.confirm_forget(
            "app", "alice", preview.confirm_token, memory_ids=[late[0].memory_id]
        )
    assert stray.value.field == "memory_ids[0]"
    out = service.confirm_forget("app", "alice", preview.confirm_token, actor="me")
    assert out == {"forgotten": len(preview.memory_ids), "memory_ids": preview.memory_ids}
    ids = live_ids(service)
    assert not ids & set(preview.memory_ids) and late[0].memory_id in ids
    # The reason never repeats the query: it is the very text the user wants gone.
    assert {r["reason"] for r in service.forgotten("app", "alice")} == {"forgotten by query"}
    expired = service.preview_forget("app", "alice", "chicken", mode="keyword", ttl_s=-1)
    with pytest.raises(InvalidInput, match="expired"):
        service.confirm_forget("app", "alice", expired.confirm_token)


# -- open threads, decisions, commitments -----------------------------------------------
class _Outcomes(Summarizer):
    name = "outcomes"

    def summarize(self, events: Sequence[Event]) -> Summary:
        return Summary(
            "We picked a flight and left the hotel open.",
            topics=("travel",),
            open_threads=("Which hotel in Lisbon?",),
            decisions=("Fly TAP on 3 May",),
            commitments=("Assistant sends the itinerary by Friday",),
            source_event_ids=tuple(e.id for e in events),
        )


def test_records_keep_open_threads_decisions_and_commitments(tmp_path) -> None:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, _Outcomes())
    stored = {
        "summary": "Earlier: budget is 800 EUR.",
        "decisions": ["Budget 800 EUR"],
        "open_threads": ["Travel insurance?"],
        "commitments": [],
    }
    trip = session(
        "trip",
        T0,
        ("u", "Book me a flight to Lisbon."),
        ("m", "TAP on 3 May?"),
        ("u", "Yes. Hotel later."),
    )
    trip.events.insert(
        0,
        Event(
            author="compactor",
            role="system",
            type="compaction",
            text=stored["summary"],
            timestamp=T0 - 5,
            id="k1",
            data={
                "start_ts": T0 - 60,
                "end_ts": T0 - 10,
                "source_event_ids": ["old"],
                "summary": stored,
            },
        ),
    )
    svc.add_session(trip)
    by_kind = {m.kind: m for m in svc.snapshot().rows_for_user("app", "alice")}
    summary = by_kind["session_summary"]  # read back from the store
    assert summary.open_threads == ("Which hotel in Lisbon?",)
    assert summary.decisions == ("Fly TAP on 3 May",)
    assert summary.commitments == ("Assistant sends the itinerary by Friday",)
    compaction = by_kind["compaction_summary"]
    assert (compaction.decisions, compaction.open_threads) == (
        ("Budget 800 EUR",),
        ("Travel insurance?",),
    )
    assert by_kind["chunk"].open_threads == ()
    recalled = {
        r.memory.kind: r.to_dict() for r in svc.search("app", "alice", "flight hotel", top_k=10)
    }
    assert recalled["session_summary"]["open_threads"] == ["Which hotel in Lisbon?"]
    assert recalled["session_summary"]["commitments"] == ["Assistant sends the itinerary by Friday"]
    assert "decisions" not in recalled["chunk"]  # only where a summary had some
    svc.close()


def test_the_extractive_summarizer_finds_plainly_stated_outcomes(service) -> None:
    service.add_session(
        session(
            "trip",
            T0,
            ("u", "Ok, let's go with the TAP flight on 3 May. Which hotel is close?"),
            ("m", "I'll send you three hotels by Friday."),
            ("u", "I might book later. Which area is quiet?"),
        )
    )
    [summary] = [
        m for m in service.snapshot().rows_for_user("app", "alice") if m.kind == "session_summary"
    ]
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
    pq.write_table(
        old.drop_columns([c for c in OPTIONAL_FIELDS if c in old.column_names]), path
    )  # as an earlier version wrote it
    reopened = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    rows = reopened.snapshot().rows_for_user("app", "alice")
    assert {m.memory_id for m in rows} == {m.memory_id for m in added}
    assert all(
        m.previous_versions == () and m.edited_by is None and m.open_threads == () for m in rows
    )
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


# -- an edit is one record, retried or raced ------------------------------------------
def _texts(svc: MemoryService, user: str = "u") -> list[str]:
    svc.reloader.refresh()
    return sorted(m.text for m in svc.snapshot().rows_for_user("a", user))


def test_an_edit_retried_after_a_failed_second_commit_leaves_one_copy(tmp_path) -> None:
    svc = MemoryService.open(tmp_path / "store", embedder=None)
    [m] = svc.add_memories(
        [
            Memory(
                app_name="a", user_id="u", session_id="online", kind="fact", text="I live in Madrid"
            )
        ]
    )
    real, calls = svc.store.forget, {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk hiccup between the two commits")
        return real(*args, **kwargs)

    svc.store.forget = flaky
    with pytest.raises(OSError):
        svc.edit_memory("a", "u", m.memory_id, "I live in Lisbon", actor="x")
    assert _texts(svc) == ["I live in Lisbon", "I live in Madrid"]  # both, never neither
    new = svc.edit_memory("a", "u", m.memory_id, "I live in Lisbon", actor="x")  # retried
    assert _texts(svc) == ["I live in Lisbon"]
    assert [v.memory_id for v in new.previous_versions] == [m.memory_id]
    # Retried once more after it succeeded (a lost answer): the same record, no error.
    assert svc.edit_memory("a", "u", m.memory_id, "I live in Lisbon", actor="x") == new
    assert _texts(svc) == ["I live in Lisbon"]
    svc.close()


def test_of_two_concurrent_editors_the_loser_hears_conflict(tmp_path) -> None:
    from mnemoray.errors import Conflict

    svc = MemoryService.open(tmp_path / "store", embedder=None)
    other = MemoryService.open(tmp_path / "store", embedder=None)  # another replica
    [m] = svc.add_memories(
        [
            Memory(
                app_name="a", user_id="u", session_id="online", kind="fact", text="I live in Madrid"
            )
        ]
    )
    real = svc.store.forget

    def after_the_other_editor(*args, **kwargs):  # it commits between our two commits
        svc.store.forget = real
        other.edit_memory("a", "u", m.memory_id, "I live in Lisbon", actor="ana")
        return real(*args, **kwargs)

    svc.store.forget = after_the_other_editor
    with pytest.raises(Conflict) as lost:
        svc.edit_memory("a", "u", m.memory_id, "I live in Porto", actor="bob")
    assert lost.value.field == "memory_id"
    assert _texts(svc) == ["I live in Lisbon"]  # one live copy: the winner's
    svc.close()
    other.close()


# -- forget tokens: a random key per store; a forged body is a 422, never a 500 -------
def test_the_token_key_is_random_per_store_and_kept(tmp_path) -> None:
    import hashlib
    import stat

    from mnemoray.memory.service import forget_query

    a, b = tmp_path / "a", tmp_path / "b"
    key = forget_query.token_key(a)
    assert len(key) == 32 and forget_query.token_key(a) == key  # created once, then read
    assert forget_query.token_key(b) != key
    path = a / "hygiene" / forget_query.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    derivable = hashlib.sha256(b"mnemoray-forget-token\0" + str(a.absolute()).encode()).digest()
    forged = forget_query.seal(derivable, "app", "u", "q", ["m1"], 2e9)
    with pytest.raises(InvalidInput) as bad:
        forget_query.unseal(key, forged, "app", "u")
    assert bad.value.field == "confirm"


@pytest.mark.parametrize(
    "body",
    [
        b"[1,2]",
        b'"x"',
        b'{"a":"app","u":"alice"}',
        b'{"a":"app","u":"alice","ids":"m1","exp":2e9}',
        b'{"a":"app","u":"alice","ids":[1],"exp":2e9}',
        b'{"a":"app","u":"alice","ids":[],"exp":"soon"}',
    ],
)
def test_a_sealed_body_that_is_no_preview_is_refused_naming_confirm(service, body) -> None:
    import base64
    import hashlib
    import hmac
    import zlib

    from mnemoray.memory.service import forget_query

    key = forget_query.token_key(service.store.root)
    text = base64.urlsafe_b64encode(zlib.compress(body)).decode().rstrip("=")
    mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:32]
    with pytest.raises(InvalidInput) as bad:
        service.confirm_forget("app", "alice", f"{text}.{mac}")
    assert bad.value.field == "confirm"


def test_forgetting_a_user_drops_their_archived_forget_records(tmp_path) -> None:
    from mnemoray.memory.store.tombstones import (
        HISTORY_DIR,
        archive_retired,
        owner_dir,
        tombstone_lines,
    )

    svc = MemoryService.open(tmp_path / "store", embedder=None)
    root = svc.store.root
    old = [
        Tombstone(
            "memory",
            3,
            1.0,
            memory_id="m1",
            app_name="app",
            user_id="alice",
            reason="my old address is 1 Main St",
        ),
        Tombstone("memory", 3, 1.0, memory_id="m2", app_name="app", user_id="bob", reason="asked"),
    ]
    # A store written before per-owner folders: one shared history file.
    legacy = root / HISTORY_DIR / "retired-legacy.jsonl"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(tombstone_lines(old))
    assert [t["reason"] for t in svc.forgotten("app", "alice")] == [old[0].reason]
    archive_retired(
        root,
        [
            Tombstone(
                "memory",
                4,
                2.0,
                memory_id="m3",
                app_name="app",
                user_id="alice",
                reason="asked again",
            )
        ],
    )
    assert not legacy.exists()  # split per owner: a read touches one owner's files
    assert owner_dir(root, "app", "alice") != owner_dir(root, "app", "bob")
    assert len(svc.forgotten("app", "alice")) == 2
    svc.forget_user("app", "alice", reason="erase")
    assert not owner_dir(root, "app", "alice").exists()
    assert [t["reason"] for t in svc.forgotten("app", "alice")] == []  # nothing was live
    assert [t["reason"] for t in svc.forgotten("app", "bob")] == ["asked"]
    # A compaction after an erase archives the erasure, not what it erased.
    archive_retired(
        root,
        [
            Tombstone(
                "memory",
                5,
                3.0,
                memory_id="m4",
                app_name="app",
                user_id="carol",
                reason="my phone is 555",
            ),
            Tombstone("user", 6, 4.0, app_name="app", user_id="carol", reason="erase"),
        ],
    )
    assert [t["reason"] for t in svc.forgotten("app", "carol")] == ["erase"]
    svc.close()
