"""Compaction: merge a shard's small segments into one, dropping dead rows for good.

Backfill chunks and online adds leave many small segments per shard; every
search pays per segment. ``compact_store`` rewrites, per shard, the segments
below ``max_segment_rows`` as ONE segment: rows re-sorted by tenant
(``segment.sort_key``), forgotten (tombstoned) and expired rows dropped
physically, a fresh FAISS index built ("auto": flat or HNSW by size). The
ledger's many small files are merged into one as well.

Crash safety is the store's two-phase write: the merged files are written
first, under new names no manifest lists (invisible; ``gc`` removes them if
the process dies here), then ONE manifest rename swaps the old segments for
the new one. Old files are deleted only after that commit. The store lock is
held throughout, so no commit or forget interleaves (readers are never
blocked: they read the committed manifest); a server's background merge
holds it only to publish (``hold_lock=False``: what changed meanwhile is
checked then, shard by shard).

A tombstone hides rows of segments committed before it. The merged segment
is committed after every existing tombstone and no longer holds the rows
they hid, so a tombstone is retired once no older segment is left anywhere.
Note: a forgotten memory whose row is dropped here is gone; adding the very
same content again later stores it anew (before compaction the dead row
would have made that add a no-op).

Table work is Arrow end to end (concat, filter, sort), so a shard of
millions of rows is never turned into Python objects.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Collection
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt, StoreError
from mnemoray.faults import crash_point
from mnemoray.files import atomic_write
from mnemoray.memory.store.layout import (
    INDEX_DIR,
    LEDGER_DIR,
    MEMORIES_DIR,
    TOMBSTONES_DIR,
    new_name,
    parquet_path,
    shard_of,
)
from mnemoray.memory.store.manifest import Manifest, SegmentEntry, read_manifest, write_manifest
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.rows import memory_schema, with_optional_columns
from mnemoray.memory.store.segment import write_segment_table
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.tombstones import archive_retired, read_tombstones

log = logging.getLogger(__name__)

# Segments at least this big are left alone (rewriting them costs more than it saves).
DEFAULT_MAX_SEGMENT_ROWS = 1_000_000
SORT_KEYS = [
    ("app_name", "ascending"),
    ("user_id", "ascending"),
    ("created_at", "ascending"),
    ("memory_id", "ascending"),
]


@dataclass(frozen=True)
class ShardCompaction:
    shard: int
    merged: tuple[str, ...]  # segment names replaced
    new_segment: str | None  # None: every row was dead
    rows_before: int
    rows_after: int


@dataclass(frozen=True)
class CompactReport:
    version_before: int
    version: int  # manifest version after (== before when nothing was done)
    shards: tuple[ShardCompaction, ...] = ()
    segments_before: int = 0
    segments_after: int = 0
    rows_dropped: int = 0  # forgotten + expired rows removed physically
    ledger_files_before: int = 0
    ledger_files_after: int = 0
    tombstones_retired: int = 0
    files_removed: tuple[str, ...] = field(default=())
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return self.version != self.version_before

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["changed"] = self.changed
        return out


def _live_mask(snap: StoreSnapshot, shard: int, name: str, now: float) -> np.ndarray | None:
    """Keep-mask of a committed segment's rows (None: all live)."""
    seg = next(s for s in snap.segments[shard] if s.name == name)
    keep = None
    dead = snap.forgotten(seg)
    if dead is not None:
        keep = ~dead
    if seg.min_expiry <= now:
        alive = ~(seg.expires <= now)  # NaN (no TTL) compares False
        keep = alive if keep is None else keep & alive
    return keep


def _merge_shard(
    store: MemoryStore,
    snap: StoreSnapshot,
    shard: int,
    entries: list[SegmentEntry],
    dim: int,
    now: float,
) -> tuple[SegmentEntry | None, int, int]:
    """Write the merged segment of ``entries`` (uncommitted); (entry, rows before, after)."""
    tables = []
    before = 0
    for entry in entries:
        table = pq.read_table(parquet_path(store.root, shard, entry.name))
        if table.num_rows != entry.rows:
            raise StoreCorrupt(
                f"compact: segment {entry.name} has {table.num_rows} rows, "
                f"manifest says {entry.rows}"
            )
        before += table.num_rows
        keep = _live_mask(snap, shard, entry.name, now)
        if keep is not None:
            table = table.filter(pa.array(keep))
        tables.append(
            with_optional_columns(table).select(memory_schema(dim).names).cast(memory_schema(dim))
        )
    merged = pa.concat_tables(tables).combine_chunks() if tables else None
    if merged is None or merged.num_rows == 0:
        return None, before, 0
    merged = merged.sort_by(SORT_KEYS)
    entry = write_segment_table(store.root, shard, new_name("seg"), merged, dim, "auto")
    return entry, before, merged.num_rows


def _merge_ledger(store: MemoryStore, m: Manifest) -> str | None:
    """One ledger file holding every entry of the current ones (uncommitted)."""
    if len(m.ledger) < 2:
        return None
    frame = (
        pl.scan_parquet([store.root / LEDGER_DIR / n for n in m.ledger])
        .unique(subset=["session_hash"], keep="first", maintain_order=True)
        .collect()
    )
    name = f"{new_name('ledger')}.parquet"
    atomic_write(store.root / LEDGER_DIR / name, frame.write_parquet)
    return name


Merged = tuple[int, list[SegmentEntry], SegmentEntry | None, int, int]


def compact_store(
    store: MemoryStore,
    *,
    max_segment_rows: int = DEFAULT_MAX_SEGMENT_ROWS,
    now: float | None = None,
    delete_old: bool = True,
    only_shards: Collection[int] | None = None,
    merge_ledger: bool = True,
    hold_lock: bool = True,
    pick: Callable[[list[SegmentEntry]], list[SegmentEntry]] | None = None,
) -> CompactReport:
    """Merge each shard's segments smaller than ``max_segment_rows`` into one.

    A shard is rewritten when it has two or more such segments, or one that
    holds dead (forgotten or expired) rows. ``delete_old=False`` leaves the
    replaced files for a later ``store.gc(grace_s)`` (e.g. while readers that
    loaded the previous manifest may still open them). ``only_shards``: only these
    (None: all); ``merge_ledger=False`` leaves the ledger files as they are. ``pick``:
    which of a shard's small segments to merge (None: all of them).

    ``hold_lock=False`` (a server's background merge): the merged files are written
    without the store lock, so commits go on meanwhile, and only the publish takes it.
    A shard is dropped from it (its new files removed) when a forget committed meanwhile
    touches it, its merged segments were replaced meanwhile, or its new files are gone
    (a ``gc`` meanwhile). The segments committed meanwhile stay listed after the merged
    one. The ledger is then left as it is (``merge_ledger`` must be False).
    """
    if not isinstance(max_segment_rows, int) or max_segment_rows < 1:
        raise StoreError(
            f"must be a positive integer, got {max_segment_rows!r}", field="max_segment_rows"
        )
    if not hold_lock and merge_ledger:
        raise StoreError(
            "a merge that does not hold the store lock leaves the ledger as it is",
            field="merge_ledger",
        )
    started = time.perf_counter()
    if getattr(store, "load_shards", None) is not None:
        store = MemoryStore(store.root)  # every shard must be visible to merge it
    with store._locked() if hold_lock else nullcontext():
        snap = store.load()
        m = copy.deepcopy(snap.manifest)  # the snapshot keeps its own
        before_version = m.version
        segments_before = sum(len(s) for s in m.segments)
        ledger_before = len(m.ledger)
        unchanged = CompactReport(
            before_version,
            before_version,
            segments_before=segments_before,
            segments_after=segments_before,
            ledger_files_before=ledger_before,
            ledger_files_after=ledger_before,
        )
        if m.version == 0:
            return CompactReport(before_version, before_version)
        # Merging needs the shards' rows: a damaged one is repaired first.
        if only_shards is None:
            snap.check_healthy()
        else:
            for shard in only_shards:
                snap.check_shard(shard)
        now = time.time() if now is None else float(now)
        dim = m.dim or 0
        written: list[Merged] = []
        new_files: list[Path] = []
        committed = False
        try:
            for shard, entries in enumerate(m.segments):
                if only_shards is not None and shard not in only_shards:
                    continue
                small = [e for e in entries if e.rows < max_segment_rows]
                if pick is not None:
                    small = pick(small)
                if not small:
                    continue
                if len(small) == 1 and _live_mask(snap, shard, small[0].name, now) is None:
                    continue  # nothing to merge, nothing dead
                entry, rows_before, rows_after = _merge_shard(store, snap, shard, small, dim, now)
                if entry is not None:
                    new_files += entry.files(store.root, shard)
                written.append((shard, small, entry, rows_before, rows_after))
            ledger = _merge_ledger(store, m) if merge_ledger else None
            if ledger is not None:
                new_files.append(store.root / LEDGER_DIR / ledger)
            if not written and ledger is None:
                return replace(unchanged, seconds=round(time.perf_counter() - started, 3))
            crash_point("compact-prepare")  # new files written, manifest not yet replaced
            published: tuple[Manifest, list[Path], int] | None = None
            with nullcontext() if hold_lock else store._locked():
                current = m if hold_lock else store.manifest()
                if not hold_lock:
                    written = _still_valid(store.root, m, current, written)
                if written or ledger is not None:
                    published = _publish(store, m.version, m.ledger, current, written, ledger)
                    committed = True
            if published is None:
                return replace(unchanged, seconds=round(time.perf_counter() - started, 3))
            m, old_files, retired = published
        except BaseException:
            # Not committed: the new files are orphans; remove what we can now. A failure
            # after the manifest's rename (its directory's fsync) leaves what it lists.
            if not committed:
                _remove_unlisted(store.root, new_files)
            raise
        removed: list[str] = []
        if delete_old:
            for path in old_files:
                if path.exists():
                    path.unlink()
                    removed.append(str(path.relative_to(store.root)))
    shards = tuple(
        ShardCompaction(
            shard, tuple(e.name for e in small), entry.name if entry is not None else None, rb, ra
        )
        for shard, small, entry, rb, ra in written
    )
    report = CompactReport(
        version_before=before_version,
        version=m.version,
        shards=shards,
        segments_before=segments_before,
        segments_after=sum(len(s) for s in m.segments),
        rows_dropped=sum(s.rows_before - s.rows_after for s in shards),
        ledger_files_before=ledger_before,
        ledger_files_after=len(m.ledger),
        tombstones_retired=retired,
        files_removed=tuple(removed),
        seconds=round(time.perf_counter() - started, 3),
    )
    log.info(
        "compacted %s: %d -> %d segments, %d dead rows dropped",
        store.root,
        report.segments_before,
        report.segments_after,
        report.rows_dropped,
    )
    return report


def _remove_unlisted(root: Path, paths: list[Path]) -> None:
    """Remove those of ``paths`` (a merge's new files) the committed manifest does not list."""
    try:
        m = read_manifest(root)
    except StoreError:
        return  # unreadable: gc removes the orphans once it is repaired
    listed = {e.name for segs in (m.segments if m else []) for e in segs}
    listed |= set(m.ledger if m else [])
    for path in paths:
        if path.stem not in listed and path.name not in listed:
            path.unlink(missing_ok=True)


def _still_valid(
    root: Path, base: Manifest, current: Manifest, written: list[Merged]
) -> list[Merged]:
    """Of a merge prepared at ``base``, the shards it may still publish at ``current``:
    those whose merged segments are all still listed, no forget committed meanwhile
    touches (its tombstones would not hide the merged rows, which are newer) and whose
    merged files are all there (a ``gc`` meanwhile may have removed what no manifest
    listed yet). The files of the shards dropped are removed."""
    forgot = _shards_forgotten(root, base, current)
    keep: list[Merged] = []
    for item in written:
        shard, small, entry, _, _ = item
        listed = {e.name for e in current.segments[shard]}
        files = entry.files(root, shard) if entry is not None else []
        if (
            shard not in forgot
            and all(e.name in listed for e in small)
            and all(p.is_file() for p in files)
        ):
            keep.append(item)
        else:
            for path in files:
                path.unlink(missing_ok=True)
    return keep


def _shards_forgotten(root: Path, base: Manifest, current: Manifest) -> set[int]:
    """The shards the tombstones committed between ``base`` and ``current`` touch (all of
    them for a tombstone without its owner, or when tombstone files were retired)."""
    known = set(base.tombstones)
    if not known <= set(current.tombstones):
        return set(range(current.shards))
    stones = read_tombstones(
        root / TOMBSTONES_DIR / n for n in current.tombstones if n not in known
    )
    if any(not (t.app_name and t.user_id) for t in stones):
        return set(range(current.shards))
    return {shard_of(t.app_name, t.user_id, current.shards) for t in stones}


def _publish(
    store: MemoryStore,
    base_version: int,
    base_ledger: list[str],
    m: Manifest,
    written: list[Merged],
    ledger: str | None,
) -> tuple[Manifest, list[Path], int]:
    """Commit the merge into ``m`` (the manifest under the lock; ``base_version`` and
    ``base_ledger``: what it was prepared at): (published manifest, replaced files,
    tombstones retired)."""
    base_ledger = list(base_ledger)  # ``m`` may be the base manifest itself
    m.version += 1
    old_files: list[Path] = []
    for shard, small, entry, _, _ in written:
        gone = {e.name for e in small}
        kept = [e for e in m.segments[shard] if e.name not in gone]
        if entry is not None:
            # Before the segments committed since the base: the list stays oldest first.
            at = next((i for i, e in enumerate(kept) if e.version > base_version), len(kept))
            kept.insert(at, replace(entry, version=m.version))
        m.segments[shard] = kept
        for e in small:
            old_files += e.files(store.root, shard)
    if ledger is not None:
        old_files += [store.root / LEDGER_DIR / n for n in base_ledger]
        m.ledger = [ledger] + [n for n in m.ledger if n not in set(base_ledger)]
    # A tombstone file is retired once no segment older than its tombstones is left.
    oldest = min((e.version for segs in m.segments for e in segs), default=m.version + 1)
    kept_tombstones, retired, history = [], 0, []
    for fname in m.tombstones:
        path = store.root / TOMBSTONES_DIR / fname
        stones = read_tombstones([path])
        if any(t.version > oldest for t in stones):
            kept_tombstones.append(fname)
        else:
            old_files.append(path)
            retired += len(stones)
            history += stones
    archive_retired(store.root, history)  # their reasons stay inspectable
    m.tombstones = kept_tombstones
    m.tombstone_count = max(m.tombstone_count - retired, 0)
    write_manifest(store.root, m)
    return m, old_files, retired


def segment_files(store: MemoryStore) -> int:
    """Parquet + FAISS files under the store (committed or not): what compaction reduces."""
    return sum(
        1
        for sub in (MEMORIES_DIR, INDEX_DIR)
        for p in (store.root / sub).rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )


__all__ = [
    "DEFAULT_MAX_SEGMENT_ROWS",
    "CompactReport",
    "ShardCompaction",
    "compact_store",
    "segment_files",
]
