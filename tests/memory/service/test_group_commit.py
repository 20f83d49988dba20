"""Group commit of online adds: concurrent adds share commits, each caller gets what it
wrote and only its own error. Keyword-only stores (no model loaded)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mnemoray.errors import StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.group_commit import CommitInterrupted
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers.extractive import ExtractiveSummarizer


def _service(root: Path) -> MemoryService:
    return MemoryService(MemoryStore(root, 4), None, ExtractiveSummarizer())


def _note(user: str, text: str, memory_id: str = "") -> Memory:
    return Memory("app", user, "online", "fact", text, memory_id=memory_id, created_at=1000.0)


def _held_first_commit(service: MemoryService) -> tuple[threading.Event, threading.Event]:
    """Make the next commit wait until released, so that adds queue behind it."""
    started, release = threading.Event(), threading.Event()
    commit = service._adds._commit
    first = [True]

    def held(memories: list[Memory]) -> list[Memory]:
        if first[0]:
            first[0] = False
            started.set()
            release.wait(10)
        return commit(memories)

    service._adds._commit = held
    return started, release


def _wait_queued(service: MemoryService, n: int) -> None:
    for _ in range(1000):
        if service._adds.queued >= n:
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"{n} adds never queued")


def test_adds_queued_behind_a_commit_share_the_next_one(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    started, release = _held_first_commit(service)
    with ThreadPoolExecutor(9) as pool:
        first = pool.submit(service.add_memories, [_note("u0", "the first note")])
        assert started.wait(10)
        rest = [
            pool.submit(service.add_memories, [_note(f"u{i}", f"note number {i}")])
            for i in range(1, 9)
        ]
        _wait_queued(service, 8)
        release.set()
        results = [first.result(10)] + [f.result(10) for f in rest]
    assert [len(r) for r in results] == [1] * 9
    assert [r[0].text for r in results] == ["the first note"] + [
        f"note number {i}" for i in range(1, 9)
    ]
    assert service._adds.commits == 2  # the held one, then one for the eight queued
    assert service._adds.batched == 8
    version = service.store.manifest().version
    assert version == 2  # two manifest versions: one per commit
    users = {m.user_id for m in service.snapshot().iter_memories()}
    assert users == {f"u{i}" for i in range(9)}


def test_one_memory_added_twice_at_once_is_written_for_the_first_caller(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    started, release = _held_first_commit(service)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(service.add_memories, [_note("u0", "warm up")])
        assert started.wait(10)
        a = pool.submit(service.add_memories, [_note("u1", "same words", "n1")])
        _wait_queued(service, 1)
        b = pool.submit(service.add_memories, [_note("u1", "same words", "n1")])
        _wait_queued(service, 2)
        release.set()
        first.result(10)
        got_a, got_b = a.result(10), b.result(10)
    assert [m.memory_id for m in got_a] == ["n1"] and got_b == []
    assert len(service.snapshot().rows_for_user("app", "u1")) == 1


def test_a_bad_add_in_a_group_fails_alone(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    service.add_memories([_note("u1", "the original words", "taken")])
    started, release = _held_first_commit(service)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(service.add_memories, [_note("u0", "warm up")])
        assert started.wait(10)
        good = pool.submit(service.add_memories, [_note("u2", "a fine note")])
        bad = pool.submit(service.add_memories, [_note("u1", "other words", "taken")])
        also_good = pool.submit(service.add_memories, [_note("u3", "another fine note")])
        _wait_queued(service, 3)
        release.set()
        first.result(10)
        assert [m.text for m in good.result(10)] == ["a fine note"]
        assert [m.text for m in also_good.result(10)] == ["another fine note"]
        with pytest.raises(StoreError, match="different content"):
            bad.result(10)
    texts = {m.text for m in service.snapshot().iter_memories()}
    assert texts == {"the original words", "warm up", "a fine note", "another fine note"}


def test_hooks_see_each_add_with_its_own_actor(tmp_path: Path) -> None:
    service = _service(tmp_path / "s")
    seen: list[tuple[str, tuple[str, ...]]] = []
    lock = threading.Lock()

    def hook(event) -> None:
        with lock:
            seen.append((event.actor, event.memory_ids))

    service.hooks.register("on_memory_created", hook)
    with ThreadPoolExecutor(6) as pool:
        done = [
            pool.submit(
                service.add_memories, [_note(f"u{i}", f"note {i}", f"id{i}")], actor=f"a{i}"
            )
            for i in range(6)
        ]
        for f in done:
            f.result(10)
    service.hooks.stop()
    assert sorted(seen) == [(f"a{i}", (f"id{i}",)) for i in range(6)]


def test_an_interrupted_commit_fails_the_whole_group_clearly(tmp_path: Path) -> None:
    """A commit interrupted in the leading thread (KeyboardInterrupt) answers every other
    caller of its group with CommitInterrupted (503), never an empty success."""
    service = _service(tmp_path / "s")
    started, release = _held_first_commit(service)
    commit = service._adds._commit
    calls = [0]

    def interrupting(memories: list[Memory]) -> list[Memory]:
        calls[0] += 1
        if calls[0] == 2:  # the group's commit
            raise KeyboardInterrupt
        return commit(memories)

    service._adds._commit = interrupting
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(service.add_memories, [_note("u0", "warm up")])
        assert started.wait(10)
        queued = [
            pool.submit(service.add_memories, [_note(f"u{i}", f"note {i}")]) for i in (1, 2, 3)
        ]
        _wait_queued(service, 3)
        release.set()
        first.result(10)
        outcomes = []
        for f in queued:
            try:
                outcomes.append(f.result(10))
            except BaseException as exc:  # noqa: BLE001 - what each caller got
                outcomes.append(exc)
    assert sum(isinstance(o, KeyboardInterrupt) for o in outcomes) == 1  # the leader's
    interrupted = [o for o in outcomes if isinstance(o, CommitInterrupted)]
    assert len(interrupted) == 2 and all(o.status == 503 for o in interrupted)
    assert not [o for o in outcomes if isinstance(o, list)]  # no caller told "unchanged"
    # The service goes on: the next add commits.
    assert [m.text for m in service.add_memories([_note("u9", "after")])] == ["after"]
