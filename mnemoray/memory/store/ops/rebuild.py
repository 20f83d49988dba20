"""Rebuild a lost or corrupt ``manifest.json`` from the files on disk (``doctor --repair``).

What the files tell, and what they do not:

- segments: every readable ``memories/shard=NNNN/*.parquet``; rows and dim are
  in the file, the index kind in its ``.faiss`` (rebuilt from the Parquet
  vectors when missing or unreadable). A segment whose rows all appear in a
  newer segment of its shard is a compaction's replaced input: left unlisted.
- the shard count: the smallest count under which every tenant hashes to the
  directory it is in (``shards=`` checks a known count instead);
- versions: tombstones hide rows of segments committed before them, so segments
  and tombstone files are put on one timeline (segment names and tombstone
  records carry their times) and numbered along it; tombstone files whose
  number changes are rewritten under new names;
- the embedding model id is written nowhere else: a store with vectors needs
  ``embedding_model=``; the summarizer name is not restored (None);
- ledger and tombstone files: every readable one.

Unreadable files are moved to ``quarantine/damaged/``. Nothing is changed
before every check passed; the manifest is published in one rename.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray.embedders.base import KEYWORD_ONLY_MODEL
from mnemoray.errors import InvalidInput, StoreCorrupt
from mnemoray.files import atomic_write_bytes
from mnemoray.memory.store.index import build_index, read_index, write_index
from mnemoray.memory.store.layout import (
    LEDGER_DIR,
    MANIFEST,
    MEMORIES_DIR,
    TOMBSTONES_DIR,
    faiss_path,
    new_name,
    parquet_path,
)
from mnemoray.memory.store.manifest import Manifest, SegmentEntry, write_manifest
from mnemoray.memory.store.ops.file_checks import (
    check_index,
    count_ledger,
    read_segment_table,
    set_aside,
)
from mnemoray.memory.store.rows import EMBEDDING
from mnemoray.memory.store.segment import index_kind_of
from mnemoray.memory.store.tombstones import Tombstone, read_tombstones, tombstone_lines

MAX_SHARDS = 4096


@dataclass
class _Segment:
    shard: int
    name: str
    rows: int
    hashes: set[str]
    tenants: set[tuple[str, str]]
    at: float  # prepare time, from the name


def _name_time(name: str) -> float:
    """Epoch seconds of a ``layout.new_name`` stamp (``seg-YYYYmmddTHHMMSSffffff-xxxx``)."""
    try:
        stamp = name.split("-")[1]
        return calendar.timegm(time.strptime(stamp[:15], "%Y%m%dT%H%M%S")) + int(stamp[15:21]) / 1e6
    except (IndexError, ValueError):
        return 0.0


def _tenant_hashes(tenants: list[tuple[str, str]]) -> np.ndarray:
    import hashlib

    return np.array(
        [
            int.from_bytes(hashlib.blake2b(f"{a}\x1f{u}".encode(), digest_size=8).digest(), "big")
            for a, u in tenants
        ],
        dtype=np.uint64,
    )


def infer_shards(placed: dict[int, set[tuple[str, str]]], shards: int | None) -> int:
    """The shard count under which every tenant is in its directory's shard."""
    tenants = [t for segs in placed.values() for t in segs]
    where = np.array([s for s, segs in placed.items() for _ in segs], dtype=np.uint64)
    digests = _tenant_hashes(tenants)
    low = max(placed, default=0) + 1
    for n in [shards] if shards else range(low, MAX_SHARDS + 1):
        if n >= low and bool(np.all(digests % np.uint64(n) == where)):
            return n
    raise StoreCorrupt(
        f"no shard count {'' if shards is None else f'{shards} '}puts every "
        f"tenant in the shard directory it is in: the segments are misplaced"
    )


def rebuild_manifest(
    root: Path, shards: int | None = None, embedding_model: str | None = None
) -> list[str]:
    """Write a manifest from the files under ``root``; returns what was done, one line each.

    The caller holds the store lock."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    done: list[str] = []
    segments: list[_Segment] = []
    damaged: list[Path] = []  # unreadable files, set aside
    lost_segments = 0
    dim: int | None = None
    for path in sorted((root / MEMORIES_DIR).glob("shard=*/*.parquet")):
        shard = int(path.parent.name.split("=", 1)[1])
        try:
            table = pq.read_table(path)
            seg_dim = (
                table.schema.field(EMBEDDING).type.list_size
                if EMBEDDING in table.column_names
                else 0
            )
            read_segment_table(path, None, seg_dim)
        except (StoreCorrupt, OSError, pa.ArrowException, KeyError) as exc:
            damaged += [path, faiss_path(root, shard, path.stem)]
            lost_segments += 1
            done.append(f"segment {path.stem} (shard {shard}): unreadable ({exc}), quarantined")
            continue
        if dim is not None and seg_dim != dim:
            raise StoreCorrupt(
                f"segments disagree on the vector size ({dim} vs {seg_dim} in "
                f"{path}): cannot rebuild the manifest"
            )
        dim = seg_dim
        tenants = set(zip(table["app_name"].to_pylist(), table["user_id"].to_pylist(), strict=True))
        segments.append(
            _Segment(
                shard,
                path.stem,
                table.num_rows,
                set(pc.unique(table["content_hash"]).to_pylist()),
                tenants,
                _name_time(path.stem),
            )
        )
    if dim and not embedding_model:
        raise InvalidInput(
            "the segments hold vectors and only the lost manifest named their "
            "model: pass --embedding-model (the model id the store was built "
            "with)",
            field="embedding_model",
        )
    placed: dict[int, set[tuple[str, str]]] = {}
    for seg in segments:
        placed.setdefault(seg.shard, set()).update(seg.tenants)
    n_shards = infer_shards(placed, shards) if placed else (shards or 1)
    stones = _read_tombstone_files(root)
    ledger = _readable_ledger(root, damaged, done)
    # -- every check passed: change files, then publish ---------------------------------
    if (root / MANIFEST).exists():
        set_aside(root, root / MANIFEST, stamp)
        done.append(f"manifest: the unreadable {MANIFEST} moved to quarantine/damaged/{stamp}/")
    for path in damaged:
        set_aside(root, path, stamp)
    kept = _drop_replaced(segments, done)
    if lost_segments:
        for name in ledger:
            set_aside(root, root / LEDGER_DIR / name, stamp)
        done.append(
            f"ledger: {len(ledger)} file(s) set aside so the next backfill processes "
            f"every session again (memories already stored are skipped)"
        )
        ledger = []
    m = Manifest(
        shards=n_shards,
        embedding_model=None if dim is None else (embedding_model if dim else KEYWORD_ONLY_MODEL),
        dim=dim,
    )
    timeline = sorted(
        [(s.at, 0, s) for s in kept] + [(at, 1, f) for f, at in stones.items()],
        key=lambda x: (x[0], x[1]),
    )
    for version, (_, _is_tomb, item) in enumerate(timeline, start=1):
        if isinstance(item, str):  # a tombstone file (is_tomb 1)
            m.tombstones.append(_renumber(root, item, version, stamp, done))
            continue
        kind = _index_for(root, item, dim or 0, done)
        m.segments[item.shard].append(SegmentEntry(item.name, item.rows, version, kind))
    m.version = len(timeline) + 1
    m.ledger = ledger
    m.ledger_sessions = count_ledger(root, ledger)
    m.tombstone_count = sum(len(read_tombstones([root / TOMBSTONES_DIR / n])) for n in m.tombstones)
    write_manifest(root, m)
    how = "" if shards else " (inferred from where tenants are; --shards sets it)"
    done.append(
        f"manifest: rebuilt from disk: {n_shards} shards{how}, {len(kept)} segment(s), "
        f"{m.rows} rows, {len(m.ledger)} ledger and {len(m.tombstones)} tombstone "
        f"file(s), version {m.version}; summarizer unknown"
    )
    return done


def _read_tombstone_files(root: Path) -> dict[str, float]:
    """Readable tombstone file name -> its time (the files it came from are one commit)."""
    out: dict[str, float] = {}
    for path in sorted((root / TOMBSTONES_DIR).glob("*.jsonl")):
        try:
            stones = read_tombstones([path])
        except StoreCorrupt as exc:
            raise StoreCorrupt(
                f"{exc.reason.split('; run ')[0]}: forgotten memories would "
                f"come back without it; restore it from a backup"
            ) from exc
        if stones:
            out[path.name] = min(t.at for t in stones)
    return out


def _readable_ledger(root: Path, damaged: list[Path], done: list[str]) -> list[str]:
    names = []
    for path in sorted((root / LEDGER_DIR).glob("*.parquet")):
        try:
            pq.read_table(path, columns=["session_hash"])
            names.append(path.name)
        except (OSError, pa.ArrowException) as exc:
            damaged.append(path)
            done.append(f"ledger {path.name}: unreadable ({exc}), quarantined")
    return names


def _drop_replaced(segments: list[_Segment], done: list[str]) -> list[_Segment]:
    """Newest first per shard: a segment whose rows are all in kept newer ones is left out."""
    kept: list[_Segment] = []
    covered: dict[int, set[str]] = {}
    for seg in sorted(segments, key=lambda s: (s.at, s.name), reverse=True):
        have = covered.setdefault(seg.shard, set())
        if seg.hashes and seg.hashes <= have:
            done.append(
                f"segment {seg.name} (shard {seg.shard}): every row is in a newer "
                f"segment (a compaction's input); left unlisted for gc"
            )
            continue
        have |= seg.hashes
        kept.append(seg)
    return sorted(kept, key=lambda s: (s.at, s.name))


def _index_for(root: Path, seg: _Segment, dim: int, done: list[str]) -> str | None:
    if not dim:
        return None
    path = faiss_path(root, seg.shard, seg.name)
    if check_index(path, seg.rows) is None:
        return index_kind_of(read_index(path, mmap=False))
    table = pq.read_table(parquet_path(root, seg.shard, seg.name), columns=[EMBEDDING])
    index = build_index(table[EMBEDDING].combine_chunks().flatten().to_numpy().reshape(-1, dim))
    write_index(index, path)
    done.append(f"index {seg.name} (shard {seg.shard}): rebuilt from the Parquet vectors")
    return index_kind_of(index)


def _renumber(root: Path, name: str, version: int, stamp: str, done: list[str]) -> str:
    path = root / TOMBSTONES_DIR / name
    stones = read_tombstones([path])
    if all(t.version == version for t in stones):
        return name
    fresh = [Tombstone(**{**t.to_dict(), "version": version}) for t in stones]
    new = f"{new_name('tomb')}.jsonl"
    atomic_write_bytes(root / TOMBSTONES_DIR / new, tombstone_lines(fresh))
    set_aside(root, path, stamp)
    done.append(f"tombstones {name}: renumbered to version {version} as {new}")
    return new
