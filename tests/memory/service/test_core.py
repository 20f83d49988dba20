"""The core MemoryService as the one place for recall, forget and reload policy.

Keyword-only stores: no model is loaded, so these run in well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mnemoray.compiler.services import MemorySnippet
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.query_cache import QueryVectorCache
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.reload import SnapshotReloader
from mnemoray.summarizers.extractive import ExtractiveSummarizer


def _service(root: Path, shards: int | None = None, **options) -> MemoryService:
    return MemoryService(MemoryStore(root, shards), None, ExtractiveSummarizer(), **options)


def _note(app: str, user: str, text: str, memory_id: str = "", t: float = 1000.0) -> Memory:
    return Memory(
        app, user, "online", "fact", text, memory_id=memory_id, created_at=t, event_time_end=t
    )


def test_forget_memory_is_scoped_to_its_owner(tmp_path: Path) -> None:
    """The same client id in two tenants: forgetting one never hides the other."""
    service = _service(tmp_path / "s", shards=1)
    service.add_memories([_note("appA", "alice", "Alice keeps bees", "note-1")])
    service.add_memories([_note("appB", "bob", "Bob keeps goats", "note-1")])
    assert service.forget_memory("appB", "alice", "note-1") == 0  # wrong app: nothing
    assert service.forget_memory("appB", "bob", "note-1") == 1
    assert [r.memory.text for r in service.search("appA", "alice", "bees")] == ["Alice keeps bees"]
    assert service.search("appB", "bob", "goats") == []
    # A fresh process reading the store sees the same thing (the tombstone names its owner).
    again = _service(tmp_path / "s")
    assert [m.memory_id for m in again.list_memories("appA", "alice")[0]] == ["note-1"]
    assert again.list_memories("appB", "bob")[0] == []
    assert again.forget_memory("appB", "bob", "note-1") == 0  # already gone


def test_forget_session_and_user_are_scoped(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    service.add_memories(
        [_note("app", "ana", "Ana likes tulips"), _note("app", "bo", "Bo likes tulips")]
    )
    assert service.forget_user("app", "ana") == 1
    assert service.search("app", "ana", "tulips") == []
    assert len(service.search("app", "bo", "tulips")) == 1


def test_reloader_on_read_and_watching(tmp_path: Path) -> None:
    root = tmp_path / "s"
    writer = _service(root)
    writer.add_memories([_note("app", "ana", "first note about kites")])
    reader = _service(root)  # default: every read checks the manifest
    assert len(reader.search("app", "ana", "kites")) == 1
    writer.add_memories([_note("app", "ana", "second note about kites", t=2000.0)])
    assert len(reader.search("app", "ana", "kites")) == 2  # visible to the next read

    store = MemoryStore(root)
    watched = SnapshotReloader(store.load, store.root, watch_interval_s=0.05)
    server = MemoryService(store, None, ExtractiveSummarizer(), reloader=watched)
    before = server.snapshot()
    writer.add_memories([_note("app", "ana", "third note about kites", t=3000.0)])
    assert server.snapshot() is before  # reads never load while watching
    watched.start()
    try:
        import time

        deadline = time.monotonic() + 5
        while server.snapshot() is before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(server.search("app", "ana", "kites", top_k=10)) == 3
        assert server.stats()["reloads"] >= 1
        # The service's own writes are visible at once, without waiting for the watcher.
        server.add_memories([_note("app", "ana", "fourth note about kites", t=4000.0)])
        assert len(server.search("app", "ana", "kites", top_k=10)) == 4
    finally:
        server.close()
    with pytest.raises(ValueError, match="watch_interval_s"):
        SnapshotReloader(store.load, store.root, watch_interval_s=0)


def test_query_vector_cache_is_an_lru_of_read_only_vectors() -> None:
    cache = QueryVectorCache(size=2)
    calls: list[str] = []

    def encode(text: str) -> np.ndarray:
        calls.append(text)
        return np.ones(3, dtype=np.float32)

    a = cache.encode("a", encode)
    assert cache.encode("a", encode) is a and calls == ["a"]
    assert not a.flags.writeable
    cache.encode("b", encode)
    cache.encode("a", encode)  # a is now the most recent
    cache.encode("c", encode)  # evicts b
    assert cache.get("b") is None and cache.get("a") is not None and len(cache) == 2
    assert QueryVectorCache(size=0).encode("x", encode) is not None  # no caching at all


def test_needs_query_vector_rules(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    service.add_memories([_note("app", "ana", "Ana likes tulips")])
    # Keyword-only store: never a vector, for any user or mode.
    assert not service.needs_query_vector("app", "ana", "tulips", "dense")
    assert not service.needs_query_vector("app", "nobody", "tulips")
    with pytest.raises(ValueError, match="mode"):
        service.needs_query_vector("app", "ana", "tulips", "fuzzy")


def test_per_app_retrieval_config(tmp_path: Path) -> None:
    keyword_app = RetrievalConfig(mode="keyword")
    service = _service(tmp_path / "s", app_configs={"kw": keyword_app})
    assert service.retriever_for("kw").config is keyword_app
    assert service.retriever_for("other").config is service.config
    service.add_memories([_note("kw", "u", "the blue kite"), _note("other", "u", "red kite")])
    assert service.search("kw", "u", "kite")[0].memory.text == "the blue kite"


def test_one_json_form_for_a_recalled_memory(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    service.add_memories([_note("app", "ana", "Ana flew to Lisbon", t=1_700_000_000.0)])
    result = service.search("app", "ana", "Lisbon")[0]
    out = result.to_dict()
    assert set(out) == {
        "memory_id",
        "app_name",
        "kind",
        "text",
        "score",
        "date",
        "signals",
        "axes",
        "topics",
        "key_facts",
        "provenance",
    }
    assert out["axes"] == ["bm25"]  # keyword-only service: BM25 found it
    assert out["app_name"] == "app"  # the owner (cross-app sharing: mnemoray.memory.store.scopes)
    assert out["date"] == "2023-11-14T22:13:20Z"
    assert out["provenance"]["session_id"] == "online"
    assert service.load_memory("app", "ana", "Lisbon") == [out]  # the agent tool: same form
    json.dumps(out)
    snippet = result.snippet()
    assert snippet == MemorySnippet.from_recalled(out)
    assert (snippet.memory_id, snippet.session_id, snippet.time) == (
        result.memory.memory_id,
        "online",
        1_700_000_000.0,
    )


def test_client_memory_ids_are_unique_per_owner_only(tmp_path: Path) -> None:
    """Another tenant taking the same client id is neither refused nor told it exists."""
    service = _service(tmp_path / "s", shards=1)  # one shard: the ids meet in one segment set
    service.add_memories([_note("appA", "alice", "Alice keeps bees", "note-1")])
    # Same shard or not, bob's note-1 is his own memory: no conflict with alice's.
    service.add_memories([_note("appA", "bob", "Bob keeps goats", "note-1")])
    assert [m.text for m in service.list_memories("appA", "bob")[0]] == ["Bob keeps goats"]
    # Within one owner an id still names one memory.
    with pytest.raises(ValueError, match="memory_id"):
        service.add_memories([_note("appA", "alice", "Alice keeps wasps", "note-1")])
