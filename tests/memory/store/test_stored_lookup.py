"""The write path's lookups (``mnemoray.memory.store.parquet.lookup``) answer exactly what the
polars scans they replaced answered: those scans are kept here as the reference, run on
a store with several segments, rows sharing ids across owners, a session id shared by
two users, a superseded session, a commit that drops rows committed meanwhile, and an
online add; cold (files read), from the cache, and from a loaded snapshot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.store.layout import LEDGER_DIR, parquet_path, shard_of
from mnemoray.memory.store.manifest import Manifest
from mnemoray.memory.store.parquet.store import MemoryStore
from tests.support.store_contract import DIM, MODEL, make, new_rng

SHARDS = 3


# -- the polars scans the lookups replaced (the reference) --------------------------------
def old_stored(
    root: Path, m: Manifest, shard: int, hashes: list[str], ids: list[str], after_version: int = 0
) -> dict[tuple[str, str, str], str]:
    files = [
        parquet_path(root, shard, e.name) for e in m.segments[shard] if e.version > after_version
    ]
    if not files:
        return {}
    found = (
        pl.concat(
            [
                pl.scan_parquet(f).select("app_name", "user_id", "memory_id", "content_hash")
                for f in files
            ]
        )
        .filter(pl.col("content_hash").is_in(hashes) | pl.col("memory_id").is_in(ids))
        .collect()
    )
    return {(a, u, i): h for a, u, i, h in found.iter_rows()}


def old_sessions_with_rows(
    root: Path,
    m: Manifest,
    keys: set[tuple[str, str, str]],
) -> set[tuple[str, str, str]]:
    shards = {shard_of(app, user, m.shards) for app, user, _ in keys}
    files = [parquet_path(root, s, e.name) for s in shards for e in m.segments[s]]
    if not files:
        return set()
    found = (
        pl.concat([pl.scan_parquet(f).select("app_name", "user_id", "session_id") for f in files])
        .filter(pl.col("session_id").is_in([k[2] for k in keys]))
        .unique()
        .collect()
    )
    return {k for k in found.rows() if k in keys}


def old_ledger(root: Path, m: Manifest, hashes: list[str]) -> set[str]:
    if not hashes or not m.ledger:
        return set()
    files = [root / LEDGER_DIR / n for n in m.ledger]
    found = (
        pl.scan_parquet(files)
        .filter(pl.col("session_hash").is_in(hashes))
        .select("session_hash")
        .unique()
        .collect()
    )
    return set(found["session_hash"].to_list())


# -- the store ----------------------------------------------------------------------------
def build(root: Path) -> MemoryStore:
    rng = new_rng()
    store = MemoryStore(root, shards=SHARDS)
    users = [f"u{i}" for i in range(6)]
    first = [
        m for i, u in enumerate(users) for m in make(rng, user=u, session="s1", n=3, start=10 * i)
    ]
    store.write_segment(first, MODEL, DIM, session_hashes=["h1", "h2"])
    # The same memory id under two owners (unique per owner only), and a second session.
    store.write_segment(
        make(rng, user="u0", session="s2", n=2, memory_id="shared")[:1]
        + make(rng, user="u1", session="s2", n=1, memory_id="shared"),
        MODEL,
        DIM,
        session_hashes=["h3"],
    )
    # u2's s1 superseded: its rows hidden, the new version written (old rows stay on disk).
    store.forget(session=("app", "u2", "s1"))
    store.write_segment(
        make(rng, user="u2", session="s1", n=2, start=500), MODEL, DIM, session_hashes=["h4"]
    )
    # Two writers prepared from the same version: the second commit drops what the first
    # committed meanwhile (``_drop_stored``), keeping its other rows.
    overlap = make(rng, user="u3", session="s9", n=4, start=900)
    pending = store.prepare_segments(overlap + first[:2], MODEL, DIM)
    store.write_segment(overlap[:2], MODEL, DIM, session_hashes=["h5"])
    result = store.commit(pending, session_hashes=["h6", "h1"])
    assert (result.written, result.skipped, result.ledger_added) == (2, 4, 1)
    store.add(make(rng, user="u4", session="s3", n=2, start=700))  # an online add
    return store


def queries(store: MemoryStore) -> tuple[list[str], list[str], set[tuple[str, str, str]]]:
    rows = [m for snap in [store.load()] for m in snap.rows_for_user("app", "u0")]
    table = pl.concat(
        [
            pl.read_parquet(p, columns=["memory_id", "content_hash"])
            for p in sorted(store.root.rglob("seg-*.parquet"))
        ]
    )
    hashes = table["content_hash"].to_list()[::2] + ["no-such-hash"]
    ids = table["memory_id"].to_list()[1::3] + ["shared", "no-such-id"]
    keys = {("app", f"u{i}", s) for i in range(7) for s in ("s1", "s2", "s3", "s9")}
    assert rows  # u0 has rows: the keys above hit and miss
    return hashes, ids, keys


def check_all(
    store: MemoryStore, hashes: list[str], ids: list[str], keys: set[tuple[str, str, str]]
) -> None:
    m = store.manifest()
    for shard in range(SHARDS):
        for after in range(m.version + 1):
            new = store._stored(m, shard, hashes, ids, after)
            old = old_stored(store.root, m, shard, hashes, ids, after)
            assert list(new.items()) == list(old.items())  # same rows, same order
    for subset in (keys, {k for k in keys if k[1] in ("u0", "u2")}, {("app", "u5", "s2")}):
        assert store.sessions_with_rows(subset) == old_sessions_with_rows(store.root, m, subset)
    wanted = ["h1", "h3", "h6", "nope"]
    assert store.ledger_contains(wanted) == old_ledger(store.root, m, wanted)


def test_lookups_equal_the_polars_scans(tmp_path: Path) -> None:
    build(tmp_path / "store")
    store = MemoryStore(tmp_path / "store")  # a fresh process's store: nothing loaded
    hashes, ids, keys = queries(MemoryStore(tmp_path / "store"))
    m = store.manifest()
    assert m.version >= 6 and sum(len(s) for s in m.segments) >= 8
    assert store.sessions_with_rows({("app", "u2", "s1")}) == {("app", "u2", "s1")}
    assert store._stored(m, shard_of("app", "u1", SHARDS), [], ["shared"]) != {}
    check_all(store, hashes, ids, keys)  # cold: columns read from the files
    check_all(store, hashes, ids, keys)  # again: from the cache
    store.load()
    check_all(store, hashes, ids, keys)  # from the snapshot's loaded segments
    assert old_stored(store.root, m, 0, [], []) == store._stored(m, 0, [], []) == {}
    assert store.sessions_with_rows(set()) == set()


def test_each_committed_row_is_stored_once_after_the_concurrent_commit(
    tmp_path: Path,
) -> None:
    store = build(tmp_path / "store")
    table = pl.concat(
        [
            pl.read_parquet(parquet_path(store.root, s, e.name), columns=["content_hash"])
            for s, entries in enumerate(store.manifest().segments)
            for e in entries
        ]
    )
    assert table["content_hash"].n_unique() == table.height


def test_a_listed_file_gone_or_damaged_after_it_was_cached_is_refused(
    tmp_path: Path,
) -> None:
    build(tmp_path / "store")
    # A store with no snapshot loaded (a backfill's driver): its lookups read the files.
    # (A loaded snapshot's segments are used as loaded; only their presence is checked.)
    store = MemoryStore(tmp_path / "store")
    keys = {("app", "u0", "s1")}
    assert store.sessions_with_rows(keys) == keys  # columns cached now
    shard = shard_of("app", "u0", SHARDS)
    path = parquet_path(store.root, shard, store.manifest().segments[shard][0].name)
    path.write_bytes(b"not parquet")  # replaced in place: read again, and refused
    with pytest.raises(StoreCorrupt, match="cannot read"):
        store.sessions_with_rows(keys)
    path.unlink()
    with pytest.raises(StoreCorrupt, match="is missing"):
        store.sessions_with_rows(keys)
    m = store.manifest()
    with pytest.raises(StoreCorrupt, match="is missing"):
        store._stored(m, shard, ["x"], [])


def test_the_cache_stays_within_its_budget(tmp_path: Path) -> None:
    build(tmp_path / "store")
    store = MemoryStore(tmp_path / "store")  # nothing loaded: every segment is read
    m = store.manifest()
    lookup = store._lookup
    lookup._tables.budget = 1  # every read evicts the one before
    every = {("app", f"u{i}", s) for i in range(6) for s in ("s1", "s2")}
    assert store.sessions_with_rows(every) == old_sessions_with_rows(store.root, m, every)
    assert len(lookup._tables) == 1 and lookup._tables.total == lookup._tables.values()[0].nbytes
    assert np.all([k[0].is_file() for k in lookup._tables])
