"""The background merge of online segments: a shard past its small-segment count is
merged (the merge of ``mnemoray compact``), large segments are left alone, recall keeps
every memory. Keyword-only stores (no model loaded)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mnemoray.errors import ConfigError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import parquet_path, shard_of
from mnemoray.memory.store.ops.background_merge import BackgroundMerge, small_segments
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.settings.serve import SettingsError, parse_settings
from mnemoray.summarizers.extractive import ExtractiveSummarizer


def _note(i: int, user: str = "alice") -> Memory:
    return Memory("app", user, "online", "fact", f"note {i} about item{i}", created_at=1000.0 + i)


def test_a_shard_past_its_count_is_merged_and_keeps_every_memory(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "s", 1)
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        for i in range(3):
            store.add([_note(i)])
        assert not merge.due() and merge.merge_now() is None
        store.add([_note(3)])
        assert merge.due()
        report = merge.merge_now()
        assert report is not None and report.changed
        assert small_segments(store.manifest(), 100) == [1]
        assert sorted(m.text for m in store.load().iter_memories()) == [
            f"note {i} about item{i}" for i in range(4)
        ]
        # The replaced files stay for their grace (a reader may still open them), then go.
        replaced = [parquet_path(store.root, 0, n) for n in report.shards[0].merged]
        assert all(p.is_file() for p in replaced)
        assert merge.delete_due(now=time.monotonic()) == 0
        assert merge.delete_due(now=time.monotonic() + merge.grace_s + 1) >= len(replaced)
        assert not any(p.exists() for p in replaced)
        assert sorted(m.text for m in MemoryStore(store.root).load().iter_memories()) == [
            f"note {i} about item{i}" for i in range(4)
        ]
    finally:
        merge.stop()


def test_segments_at_or_over_small_rows_are_left_alone(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "s", 1)
    store.add([_note(i) for i in range(10)])  # one segment of 10 rows: not small at 10
    big = store.manifest().segments[0][0].name
    merge = BackgroundMerge(store, after_segments=2, small_rows=10)
    try:
        store.add([_note(10)])
        store.add([_note(11)])
        assert merge.merge_now() is not None
        names = [e.name for e in store.manifest().segments[0]]
        assert big in names and len(names) == 2  # the large one, and the two small merged
    finally:
        merge.stop()


def test_the_service_merges_online_writes_in_the_background(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "s", 2)
    service = MemoryService(store, None, ExtractiveSummarizer())
    service.merge = BackgroundMerge(store, after_segments=3, small_rows=1000)
    try:
        for i in range(20):
            service.add_memories([_note(i, user=f"u{i % 4}")])
        deadline = time.monotonic() + 20
        while service.merge.due() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert max(small_segments(store.manifest(), 1000)) < 3
        assert service.merge.merges >= 1 and service.merge.failures == 0
        found = service.search("app", "u1", "item5", mode="keyword")
        assert [r.memory.text for r in found][:1] == ["note 5 about item5"]
    finally:
        service.close()
    assert not service.merge._thread.is_alive()


def test_only_due_shards_are_merged_and_the_ledger_is_left(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "s", 2)
    by_shard: dict[int, str] = {}
    for i in range(40):  # a user of each shard
        by_shard.setdefault(shard_of("app", f"user{i}", 2), f"user{i}")
    busy, quiet = by_shard[0], by_shard[1]
    for i in range(3):
        store.add([_note(i, busy)])
    for i in range(2):
        store.add([_note(10 + i, quiet)])
    store.ledger_add(["h1"])
    store.ledger_add(["h2"])
    merge = BackgroundMerge(store, after_segments=3, small_rows=100)
    try:
        assert merge.due_shards() == [0]
        merge.merge_now()
        counts = small_segments(store.manifest(), 100)
        assert counts[0] == 1 and counts[1] == 2  # the quiet shard is not due: left alone
        assert len(store.manifest().ledger) == 2
    finally:
        merge.stop()


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 2"):
        BackgroundMerge(MemoryStore(tmp_path / "s", 1), after_segments=1)
    with pytest.raises(ConfigError, match="some shards only"):
        BackgroundMerge(MemoryStore(tmp_path / "s", 1, load_shards=[0]))
    with pytest.raises(SettingsError, match="merge_after_segments"):
        parse_settings({"store": str(tmp_path / "s"), "writes": {"merge_after_segments": 1}})
    ok = parse_settings({"store": str(tmp_path / "s"), "writes": {"merge_after_segments": 0}})
    assert ok.writes.merge_after_segments == 0


def _merging_with(monkeypatch: pytest.MonkeyPatch, meanwhile) -> None:
    """Run ``meanwhile()`` once, while the merge writes its merged segment (unlocked)."""
    from mnemoray.memory.store.ops import merge as merge_module

    real = merge_module._merge_shard
    done: list[bool] = []

    def merging(*args, **kwargs):
        out = real(*args, **kwargs)
        if not done:
            done.append(True)
            meanwhile()  # takes the store lock: it would wait for good if the merge held it
        return out

    monkeypatch.setattr(merge_module, "_merge_shard", merging)


def _texts(store: MemoryStore) -> list[str]:
    return sorted(m.text for m in MemoryStore(store.root).load().iter_memories())


def test_commits_go_on_while_the_merge_writes(tmp_path: Path, monkeypatch) -> None:
    store = MemoryStore(tmp_path / "s", 1)
    for i in range(4):
        store.add([_note(i)])
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        _merging_with(monkeypatch, lambda: store.add([_note(4)]))
        report = merge.merge_now()
        assert report is not None and report.changed
        entries = store.manifest().segments[0]
        # The merged segment (the older rows) first, the commit made meanwhile after it.
        assert [e.rows for e in entries] == [4, 1]
        assert entries[0].name == report.shards[0].new_segment
        assert _texts(store) == [f"note {i} about item{i}" for i in range(5)]
        assert sorted(m.text for m in store.load().iter_memories()) == _texts(store)
    finally:
        merge.stop()


def test_a_forget_meanwhile_drops_the_merge(tmp_path: Path, monkeypatch) -> None:
    store = MemoryStore(tmp_path / "s", 1)
    notes = [_note(i) for i in range(4)]
    for note in notes:
        store.add([note])
    before = store.manifest()
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        _merging_with(
            monkeypatch, lambda: store.forget([notes[1].memory_id], owner=("app", "alice"))
        )
        report = merge.merge_now()
        assert report is not None and not report.changed
        after = store.manifest()
        assert after.segments == before.segments and after.version == before.version + 1
        assert "note 1 about item1" not in _texts(store) and len(_texts(store)) == 3
        listed = {e.name for e in after.segments[0]}
        assert {p.stem for p in (store.root / "memories").rglob("*.parquet")} == listed
        # The next merge has the forget in its snapshot: it merges and drops the row.
        monkeypatch.undo()
        again = merge.merge_now()
        assert again is not None and again.changed and again.rows_dropped == 1
        assert len(_texts(store)) == 3
    finally:
        merge.stop()


def test_segments_replaced_meanwhile_drop_that_shard(tmp_path: Path, monkeypatch) -> None:
    from mnemoray.memory.store.ops.merge import compact_store

    store = MemoryStore(tmp_path / "s", 1)
    for i in range(4):
        store.add([_note(i)])
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        _merging_with(monkeypatch, lambda: compact_store(store, delete_old=False))
        report = merge.merge_now()
        assert report is not None and not report.changed  # `mnemoray compact` won
        assert len(store.manifest().segments[0]) == 1
        assert _texts(store) == [f"note {i} about item{i}" for i in range(4)]
    finally:
        merge.stop()


def test_merged_files_a_gc_removed_meanwhile_are_not_published(tmp_path: Path, monkeypatch) -> None:
    store = MemoryStore(tmp_path / "s", 1)
    for i in range(4):
        store.add([_note(i)])
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        _merging_with(monkeypatch, lambda: store.gc(grace_s=0))  # unlisted: the merged files
        report = merge.merge_now()
        assert report is not None and not report.changed
        fresh = MemoryStore(store.root).load()
        assert fresh.damaged == {} and len(store.manifest().segments[0]) == 4
        assert _texts(store) == [f"note {i} about item{i}" for i in range(4)]
    finally:
        merge.stop()


def test_a_forget_in_another_shard_leaves_the_merge(tmp_path: Path, monkeypatch) -> None:
    store = MemoryStore(tmp_path / "s", 2)
    mine = shard_of("app", "alice", 2)
    bob = next(u for u in (f"u{k}" for k in range(50)) if shard_of("app", u, 2) != mine)
    other = Memory("app", bob, "online", "fact", "bob's own note", created_at=999.0)
    for i in range(4):
        store.add([_note(i)])
    store.add([other])
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        _merging_with(monkeypatch, lambda: store.forget([other.memory_id], owner=("app", bob)))
        report = merge.merge_now()
        assert report is not None and report.changed  # alice's shard was not touched
        assert len(store.manifest().segments[mine]) == 1
        assert _texts(store) == [f"note {i} about item{i}" for i in range(4)]
    finally:
        merge.stop()


def test_a_merge_takes_one_size_tier() -> None:
    from mnemoray.memory.store.manifest import SegmentEntry
    from mnemoray.memory.store.ops.background_merge import tier_to_merge

    def entries(*rows: int) -> list[SegmentEntry]:
        return [SegmentEntry(f"s{i}", n, i + 1, None) for i, n in enumerate(rows)]

    assert [e.rows for e in tier_to_merge(entries(900, *[1] * 5, 20, 30))] == [1] * 5
    assert [e.rows for e in tier_to_merge(entries(6, 5, 4))] == [6, 5, 4]
    assert [e.rows for e in tier_to_merge(entries(300, 20, 4, 1))] == [4, 1]  # no pair: 2
    assert [e.rows for e in tier_to_merge(entries(2, 2, 20, 20))] == [2, 2]  # the smaller tier


def test_rows_are_rewritten_about_once_per_tier(tmp_path: Path) -> None:
    """Adds one at a time with a merge whenever due: the growing segment is not rewritten
    at every merge (that cost grows with the square of the adds)."""
    store = MemoryStore(tmp_path / "s", 1)
    merge = BackgroundMerge(store, after_segments=16, small_rows=100_000)
    rewritten = 0
    try:
        for i in range(320):
            store.add([_note(i)])
            while (report := merge.merge_now()) is not None and report.changed:
                rewritten += sum(s.rows_before for s in report.shards)
    finally:
        merge.stop()
    assert len(_texts(store)) == 320
    # Merging every small segment each time rewrites each row about 11 times here.
    assert rewritten < 320 * 4


def test_merges_dropped_again_and_again_end_in_one_that_holds_the_lock(
    tmp_path: Path, monkeypatch
) -> None:
    from mnemoray.memory.store.ops import background_merge as bm

    store = MemoryStore(tmp_path / "s", 1)
    notes = [_note(i) for i in range(8)]
    for note in notes:
        store.add([note])
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    held: list[bool] = []
    real = bm.compact_store

    def spy(*args, **kwargs):
        held.append(kwargs["hold_lock"])
        return real(*args, **kwargs)

    monkeypatch.setattr(bm, "compact_store", spy)
    try:
        for k in range(bm.MAX_DROPPED):  # a forget of the shard lands during each merge
            _merging_with(
                monkeypatch,
                lambda k=k: store.forget([notes[k].memory_id], owner=("app", "alice")),
            )
            report = merge.merge_now()
            assert report is not None and not report.changed
        report = merge.merge_now()  # held throughout: nothing can land meanwhile
        assert report is not None and report.changed
        assert held == [False] * bm.MAX_DROPPED + [True]
        assert len(_texts(store)) == 8 - bm.MAX_DROPPED
    finally:
        merge.stop()


def test_a_failure_after_the_manifest_rename_keeps_the_files_it_lists(
    tmp_path: Path, monkeypatch
) -> None:
    from mnemoray.memory.store.ops import merge as merge_module

    store = MemoryStore(tmp_path / "s", 1)
    for i in range(4):
        store.add([_note(i)])
    real = merge_module.write_manifest

    def renamed_then_failed(root, m):
        real(root, m)
        raise OSError("fsync of the store directory failed")

    monkeypatch.setattr(merge_module, "write_manifest", renamed_then_failed)
    merge = BackgroundMerge(store, after_segments=4, small_rows=100)
    try:
        with pytest.raises(OSError):
            merge.merge_now()
    finally:
        merge.stop()
    fresh = MemoryStore(store.root).load()
    assert fresh.damaged == {} and len(store.manifest().segments[0]) == 1
    assert _texts(store) == [f"note {i} about item{i}" for i in range(4)]
