"""The entity-graph merge done where a backfill chunk is prepared: the same graph rows
(ids, versions, validity, supports, ...) and memories as merging in the commit."""

from __future__ import annotations

import itertools
import json
from datetime import date
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.backfill import commit as backfill_commit
from mnemoray.backfill.archive import write_archive
from mnemoray.graph import extract as extract_module
from mnemoray.graph import extract_session
from mnemoray.memory.store.graph import parts as graph_parts
from mnemoray.memory.store.graph import prepared as graph_prepared
from mnemoray.memory.store.graph.parts import GRAPH_DIR, MAX_PARTS, listed_files, read_shard
from mnemoray.memory.store.graph.tables import TABLES
from mnemoray.memory.store.parquet import commit as store_module
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.sessions.session import Session
from tests.graph.test_integration import conv

CITIES = ("Berlin", "Paris", "Madrid", "Boston", "Denver", "Austin", "Lisbon")
JOBS = ("Acme Labs", "Globex", "Initech", "Umbrella")


def _session(user: str, i: int, extra: int = 0) -> Session:
    """Session i of ``user``: where they live and work now, who they met; ``extra``
    more turns make a newer copy of it (re-archived, longer)."""
    turns = [
        ("Melanie", f"I moved to {CITIES[i % len(CITIES)]} last month."),
        ("Caroline", f"Nice! My sister Anna works at {JOBS[i % len(JOBS)]}."),
        ("Melanie", f"I met Sam {i} times at {JOBS[(i + 1) % len(JOBS)]}."),
    ]
    turns += [
        ("Melanie", f"Also, Max visited {CITIES[(i + k) % len(CITIES)]}.") for k in range(extra)
    ]
    return conv(f"{user}-s{i}", date(2023, 1 + i % 12, 1 + i), *turns, user=user)


def archive_rows() -> list[Session]:
    """Users whose sessions span chunk boundaries, a longer copy of an early session
    archived late (it supersedes the stored one: a forget inside the commit) and an
    older copy after it (ledgered, replaces nothing), enough chunks to merge parts."""
    rows = [_session(u, i) for i in range(4) for u in ("u1", "u2", "u3")]
    rows.append(_session("u1", 0, extra=2))  # newer copy of u1-s0
    rows += [_session(u, i) for i in range(4, 8) for u in ("u2", "u4")]
    rows.append(_session("u2", 1))  # the same row again: skipped
    rows.append(_session("u3", 2, extra=1))  # newer copy of u3-s2, then an older one
    rows.append(_session("u3", 2))
    return rows


def graph_rows(store: Path) -> dict[str, list[str]]:
    """Every graph row the store serves, all columns, in a canonical order."""
    m = MemoryStore(store).manifest()
    out: dict[str, list[str]] = {t: [] for t in TABLES}
    for shard in range(m.shards):
        tables = read_shard(store, m, shard)
        for t in TABLES:
            out[t] += [json.dumps(r, sort_keys=True) for r in tables[t].to_pylist()]
    return {t: sorted(rows) for t, rows in out.items()}


def memory_rows(store: Path) -> list[tuple[Any, ...]]:
    snap = MemoryStore(store).load()
    return sorted(
        (m.app_name, m.user_id, m.memory_id, m.text, m.session_id) for m in snap.iter_memories()
    )


def run(
    arch: Path,
    store: Path,
    *,
    prepare: bool,
    monkeypatch: pytest.MonkeyPatch,
    commit_every: int = 2,
) -> tuple[int, int, int]:
    """Backfill ``arch``; ``prepare=False``: the merge all in the commit (as before).
    Returns how many sessions the commits merged themselves, how many times a commit
    merged a shard's parts into one, and how many times it put a prepared rollup of a
    shard's parts in their place."""
    merged, rewrites, roll_ups = [], [], []
    real, real_list_merged = store_module.merge_extracts, graph_parts.list_merged
    real_take = store_module.take_prepared

    def counting(root, m, extracts, read=None):
        merged.extend(extracts)
        return real(root, m, extracts, read)

    def counting_take(*args, **kwargs):
        here = real_take(*args, **kwargs)
        merged.extend([None] * here)
        return here

    def counting_rewrites(*args, **kwargs):
        rewrites.append(args[2])
        return real_list_merged(*args, **kwargs)

    real_roll_up = graph_prepared._roll_up

    def counting_roll_ups(root, m, p, rollup):
        before = list(m.graph[p.shard])
        real_roll_up(root, m, p, rollup)
        if m.graph[p.shard] != before:
            roll_ups.append(p.shard)

    ticks = itertools.count()
    with monkeypatch.context() as mp:
        mp.setattr(store_module, "merge_extracts", counting)
        mp.setattr(store_module, "take_prepared", counting_take)
        mp.setattr(graph_prepared, "list_merged", counting_rewrites)
        mp.setattr(graph_parts, "list_merged", counting_rewrites)
        mp.setattr(graph_prepared, "_roll_up", counting_roll_ups)
        # Extraction stamps each record with the wall clock: the same tick sequence in
        # both runs (in process, sessions are extracted in archive order) makes every
        # row comparable.
        mp.setattr(extract_module, "time", SimpleNamespace(time=lambda: 1e9 + next(ticks)))
        if not prepare:
            mp.setattr(backfill_commit, "prepare_graph", lambda store, graph: ())
        backfill(
            BackfillConfig(
                arch,
                store,
                shards=2,
                embedder=None,
                commit_every=commit_every,
                progress_interval_s=0,
            )
        )
    return len(merged), len(rewrites), len(roll_ups)


def test_prepared_merge_writes_the_graph_the_commit_merge_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = archive_rows()
    write_archive(rows, tmp_path / "archive" / "sessions.jsonl")
    arch = tmp_path / "archive"
    at_commit, merges, _ = run(arch, tmp_path / "before", prepare=False, monkeypatch=monkeypatch)
    in_commit, rewrites, roll_ups = run(
        arch, tmp_path / "after", prepare=True, monkeypatch=monkeypatch
    )
    assert graph_rows(tmp_path / "after") == graph_rows(tmp_path / "before")
    assert memory_rows(tmp_path / "after") == memory_rows(tmp_path / "before")
    before, after = (MemoryStore(tmp_path / s).manifest() for s in ("before", "after"))
    assert after.ledger_sessions == before.ledger_sessions
    # The commits merged shards' parts into one; the prepared rollups did it instead.
    assert merges and roll_ups and not rewrites
    assert all(len(parts) < MAX_PARTS for parts in after.graph)
    # The commits merged only what the prepared parts could not stand for (the forget
    # of a superseded session changes its user's graph between prepare and commit).
    assert 0 < in_commit < at_commit
    # No prepared part that a commit did not take is left behind.
    on_disk = set((tmp_path / "after" / GRAPH_DIR).rglob("*.parquet"))
    assert on_disk == listed_files(tmp_path / "after", after)
    rerun = run(arch, tmp_path / "after", prepare=True, monkeypatch=monkeypatch)
    assert rerun == (0, 0, 0) and MemoryStore(tmp_path / "after").manifest().graph == after.graph


def _extract(session: Session) -> tuple[str, Any]:
    return (
        f"h-{session.user_id}-{session.session_id}-{len(session.events)}",
        extract_session(session, [], recorded_at=session.created_at + len(session.events)),
    )


def _commit(store: MemoryStore, *sessions: Session, prepared: Any = ()) -> None:
    graph = [_extract(s) for s in sessions]
    store.commit(None, session_hashes=[h for h, _ in graph], graph=graph, prepared_graph=prepared)


def _leftovers(root: Path) -> set[Path]:
    return set((root / GRAPH_DIR).rglob("*.parquet")) - listed_files(
        root, MemoryStore(root).manifest()
    )


@pytest.mark.parametrize("meanwhile", ["same_user", "other_user", "forget_then_merge"])
def test_a_part_is_taken_only_while_its_users_graphs_are_unchanged(
    tmp_path: Path, meanwhile: str
) -> None:
    """A commit between prepare and commit: another user's (the part stands), the same
    user's (merged again at commit), or a forget of the user that a later merge of the
    shard's parts hides from the part list (merged again at commit)."""
    prepared_store, plain_store = MemoryStore(tmp_path / "p", 1), MemoryStore(tmp_path / "q", 1)
    first, late = _session("u1", 0), _session("u1", 3)
    steps: list[tuple[str, Any]] = [("commit", [first])]
    if meanwhile == "same_user":
        steps.append(("commit", [_session("u1", 1)]))
    elif meanwhile == "other_user":
        steps.append(("commit", [_session("u2", 1)]))
    else:
        steps.append(("forget", ("app", "u1")))
        steps += [("commit", [_session(f"o{k}", k)]) for k in range(MAX_PARTS)]
    _commit(prepared_store, first)
    prepared = prepared_store.prepare_graph([_extract(late)])
    assert len(prepared) == 1
    for store in (prepared_store, plain_store):
        for kind, arg in steps[1:] if store is prepared_store else steps:
            if kind == "commit":
                _commit(store, *arg)
            else:
                store.forget(user=arg)
    calls: list[int] = []
    real = store_module.take_prepared

    def counting(*args, **kwargs):  # sessions the commit merged itself
        calls.append(real(*args, **kwargs))
        return calls[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store_module, "take_prepared", counting)
        _commit(prepared_store, late, prepared=prepared)
    _commit(plain_store, late)
    assert graph_rows(tmp_path / "p") == graph_rows(tmp_path / "q")
    assert calls == [0 if meanwhile == "other_user" else 1]
    assert not _leftovers(tmp_path / "p")


def test_a_part_for_other_sessions_than_the_commit_publishes_is_not_taken(tmp_path: Path) -> None:
    """A session already ledgered is not merged again: a part that merged it is dropped."""
    store = MemoryStore(tmp_path / "s", 2)
    a, b = _session("u1", 0), _session("u1", 1)
    _commit(store, a)
    prepared = store.prepare_graph([_extract(a), _extract(b)])
    _commit(store, a, b, prepared=prepared)
    plain = MemoryStore(tmp_path / "q", 2)
    _commit(plain, a)
    _commit(plain, b)
    assert graph_rows(tmp_path / "s") == graph_rows(tmp_path / "q")
    assert not _leftovers(tmp_path / "s")


def _without_clock(rows: dict[str, list[str]]) -> dict[str, list[str]]:
    """``recorded_at`` is when a worker extracted the session: the rest must match."""

    def strip(row: str) -> str:
        data = json.loads(row)
        data.pop("recorded_at", None)
        return json.dumps(data, sort_keys=True)

    return {t: sorted(strip(r) for r in rs) for t, rs in rows.items()}


@pytest.mark.ray
def test_ray_data_backfill_writes_the_graph_the_in_process_commit_merge_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_cluster: None
) -> None:
    """Chunks prepared ahead of their commits in Ray workers (some parts then stale, merged
    again at commit) against the in-process backfill merging everything in its commits."""
    from mnemoray.backfill import RayOptions
    from mnemoray.pipeline.backfill import RayDataEngine

    write_archive(archive_rows(), tmp_path / "archive" / "sessions.jsonl")
    arch = tmp_path / "archive"
    at_commit, _, _ = run(arch, tmp_path / "before", prepare=False, monkeypatch=monkeypatch)
    merged: list[int] = []
    real = store_module.take_prepared

    def counting(*args, **kwargs):  # sessions the driver's commits merged themselves
        merged.append(real(*args, **kwargs))
        return merged[-1]

    monkeypatch.setattr(store_module, "take_prepared", counting)
    backfill(
        BackfillConfig(
            arch,
            tmp_path / "ray",
            shards=2,
            embedder=None,
            commit_every=2,
            progress_interval_s=0,
            ray=RayOptions(batch_size=2),
        ),
        RayDataEngine(),
    )
    assert sum(merged) < at_commit  # the workers' parts were listed as they are
    assert _without_clock(graph_rows(tmp_path / "ray")) == _without_clock(
        graph_rows(tmp_path / "before")
    )
    assert memory_rows(tmp_path / "ray") == memory_rows(tmp_path / "before")
    m = MemoryStore(tmp_path / "ray").manifest()
    on_disk = set((tmp_path / "ray" / GRAPH_DIR).rglob("*.parquet"))
    assert on_disk == listed_files(tmp_path / "ray", m)


@pytest.mark.parametrize("meanwhile", [0, 1, 2])
def test_a_rollup_replaces_the_parts_it_read_only_while_they_lead_the_list(
    tmp_path: Path, meanwhile: int
) -> None:
    """A chunk prepared at a shard near its most parts carries the shard's rows as one part:
    it replaces the parts it was read from if they still lead the list (commits after them
    stay), and goes when a merge replaced them meanwhile (2 commits: the 8th part)."""
    stores = MemoryStore(tmp_path / "p", 1), MemoryStore(tmp_path / "q", 1)
    late = _session("u1", 3)
    for store in stores:
        for k in range(MAX_PARTS - 2):
            _commit(store, _session(f"o{k}", k))
    prepared = stores[0].prepare_graph([_extract(late)])
    assert prepared[0].rollup is not None
    for store in stores:
        for k in range(meanwhile):
            _commit(store, _session(f"n{k}", k))
    _commit(stores[0], late, prepared=prepared)
    _commit(stores[1], late)
    assert graph_rows(tmp_path / "p") == graph_rows(tmp_path / "q")
    parts = MemoryStore(tmp_path / "p").manifest().graph[0]
    rolled = prepared[0].rollup.name in {p.name for p in parts}
    assert rolled == (meanwhile < 2) and len(parts) == (2 + meanwhile if rolled else 2)
    assert not _leftovers(tmp_path / "p")


def test_the_kept_user_lists_are_bounded_by_users_not_parts(monkeypatch) -> None:
    from mnemoray.memory.store.graph import prepared as gp

    lists = gp._user_lists(100)
    monkeypatch.setattr(gp, "_users", lists)

    def users(n: int, tag: str) -> frozenset[tuple[str, str]]:
        return frozenset(("app", f"{tag}-{i}") for i in range(n))

    for k in range(10):
        lists.put(("root", 0, f"part-{k}"), users(20, str(k)))
    assert lists.total <= 100 and lists.total == sum(len(u) for u in lists.values())
    assert list(lists)[-1] == ("root", 0, "part-9")  # the newest stay
    lists.put(("root", 0, "whole-shard"), users(60, "big"))  # over a quarter: not kept
    assert lists.get(("root", 0, "whole-shard")) is None
    lists.put(("root", 0, "part-9"), users(5, "again"))  # replaced, counted once
    assert lists.total == sum(len(u) for u in lists.values())
