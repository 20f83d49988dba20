"""MemoryService writes: the slow, pure steps (distilling, embedding) run outside the
process-wide write lock, so one tenant's large write never holds up another's commit;
what the lock decides (stored copies, ids, the ledger) still ends consistent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mnemoray.errors import StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService, embed_memories, text_groups
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers.extractive import ExtractiveSummarizer
from tests.support.embedders import GatedEmbedder
from tests.support.factories import T0, session


def _note(app: str, user: str, text: str, memory_id: str = "") -> Memory:
    return Memory(app, user, "online", "fact", text, memory_id=memory_id, created_at=T0)


@pytest.fixture
def gated() -> GatedEmbedder:
    return GatedEmbedder()


@pytest.fixture
def service(tmp_path: Path, gated: GatedEmbedder) -> Iterator[MemoryService]:
    svc = MemoryService(MemoryStore(tmp_path / "store", 2), gated, ExtractiveSummarizer())
    svc.add_memories([_note("app", "setup", "the store exists and has its model")])
    yield svc
    gated.release.set()
    svc.close()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as p:
        yield p


def _blocked(pool: ThreadPoolExecutor, gated: GatedEmbedder, fn: Callable[[], Any]) -> Future:
    """``fn`` started in the pool and held inside the embedder."""
    future = pool.submit(fn)
    assert gated.entered.wait(10), "the write never reached the embedder"
    assert not future.done()
    return future


def _texts(service: MemoryService, user: str) -> list[str]:
    return [m.text for m in service.snapshot().rows_for_user("app", user)]


@pytest.mark.parametrize("write", ["add_memories", "ingest_session", "edit_memory"])
def test_another_tenant_commits_while_a_write_is_embedding(
    service: MemoryService, gated: GatedEmbedder, pool: ThreadPoolExecutor, write: str
) -> None:
    if write == "edit_memory":
        [old] = service.add_memories([_note("app", "ana", "Ana plays chess")])
    calls: dict[str, Callable[[], Any]] = {
        "add_memories": lambda: service.add_memories([_note("app", "ana", "GATED big note")]),
        "ingest_session": lambda: service.ingest_session(
            session("s1", T0, ("u", "GATED I moved to Madrid last spring."), user="ana")
        ),
        "edit_memory": lambda: service.edit_memory("app", "ana", old.memory_id, "GATED chess"),
    }
    first = _blocked(pool, gated, calls[write])
    # Under the old lock this add waited for the blocked embed; now it commits at once.
    added = service.add_memories([_note("app", "bob", "Bob keeps bees")])
    assert [m.text for m in added] == ["Bob keeps bees"]
    assert _texts(service, "bob") == ["Bob keeps bees"]
    assert not first.done()  # still embedding while bob's write committed
    gated.release.set()
    first.result(10)
    assert any("GATED" in t for t in _texts(service, "ana"))


def test_the_same_memory_added_twice_at_once_is_stored_once(
    service: MemoryService, gated: GatedEmbedder, pool: ThreadPoolExecutor
) -> None:
    note = _note("app", "ana", "GATED Ana's passport number ends in 42", "passport")
    first = _blocked(pool, gated, lambda: service.add_memories([note]))
    gated.release.set()  # the second add embeds without blocking too: both race to commit
    second = service.add_memories([note])
    written = first.result(10) + second
    assert [m.memory_id for m in written] == ["passport"]  # one wrote it, one saw it stored
    assert _texts(service, "ana") == [note.text]


def test_one_id_with_other_content_at_once_is_refused_by_the_commit(
    service: MemoryService, gated: GatedEmbedder, pool: ThreadPoolExecutor
) -> None:
    """The id check is the store's, at commit: embedding earlier changes nothing."""
    rome = _note("app", "ana", "GATED lives in Rome", "home")
    first = _blocked(pool, gated, lambda: service.add_memories([rome]))
    service.add_memories([_note("app", "ana", "lives in Oslo", "home")])
    gated.release.set()
    with pytest.raises(StoreError, match="different content"):
        first.result(10)
    assert _texts(service, "ana") == ["lives in Oslo"]


def test_a_session_ingested_twice_at_once_is_ledgered_once(
    service: MemoryService, gated: GatedEmbedder, pool: ThreadPoolExecutor
) -> None:
    s = session("s1", T0, ("u", "GATED My sister lives in Lisbon."), user="ana")
    first = _blocked(pool, gated, lambda: service.ingest_session(s))
    second = pool.submit(service.ingest_session, s)  # embeds too, then races to commit
    gated.release.set()
    results = sorted((first.result(10), second.result(10)), key=lambda r: r.status)
    assert [r.status for r in results] == ["added", "unchanged"]
    assert len(_texts(service, "ana")) == len(results[0].added)


def test_a_grown_session_embeds_only_its_new_records(
    service: MemoryService, gated: GatedEmbedder
) -> None:
    turns = [("u", "I adopted a beagle named Max."), ("m", "Congratulations on Max!")]
    service.ingest_session(session("s1", T0, *turns, user="ana"))
    before = {m.content_hash for m in service.snapshot().rows_for_user("app", "ana")}
    gated.calls.clear()
    grown = session("s1", T0, *turns, ("u", "Max is allergic to chicken."), user="ana")
    service.ingest_session(grown)
    rows = service.snapshot().rows_for_user("app", "ana")
    new = sorted(m.key_text for m in rows if m.content_hash not in before)
    assert new and sorted(t for call in gated.calls for t in call) == new


def test_text_groups_bound_the_characters_of_each_call() -> None:
    assert text_groups(["aaaa", "bb", "cc", "dddddd", "e"], 6) == [[0, 1], [2], [3], [4]]
    assert text_groups(["x" * 10], 4) == [[0]]  # a longer text goes alone
    assert text_groups(["a", "b"], None) == [[0, 1]]
    assert text_groups([], 4) == []


def test_embed_memories_calls_the_embedder_once_per_group(gated: GatedEmbedder) -> None:
    notes = [_note("app", "ana", t) for t in ("one two", "three", "four five six")]
    out = embed_memories(notes, gated, group_chars=8)
    assert [len(c) for c in gated.calls] == [1, 1, 1]
    assert all(m.embedding is not None for m in out)
    gated.calls.clear()
    assert embed_memories(notes, gated)[2].embedding is not None
    assert [len(c) for c in gated.calls] == [3]
