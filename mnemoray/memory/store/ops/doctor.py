"""`mnemoray doctor`: check a memory store's files against its manifest, and repair them.

Checked: the manifest; every listed segment (Parquet readable, rows and schema
as listed, tenant rows sorted; FAISS index present, readable, one vector per
row); every listed ledger and tombstone file.

``repair`` fixes what can be fixed without guessing, under the store lock, and
publishes the result in one manifest rename (run it again: nothing left to do):

- a missing or corrupt FAISS index is rebuilt from the segment's Parquet vectors;
- an unreadable segment is removed from the manifest and its files moved to
  ``quarantine/damaged/``; the sessions it held are named when the file can
  still be read in part. The ledger only records hashes of raw archive rows,
  which say nothing of the sessions in a segment, so the whole ledger is set
  aside too: the next backfill processes every session again and skips the
  memories already stored (content hash), writing back only what was lost;
- a lost or unreadable ledger file is dropped from the manifest: the segments
  do not store raw-row hashes, so it cannot be rebuilt; the sessions it recorded
  are processed again by the next backfill, which stores no duplicates;
- a lost manifest is rebuilt from the files on disk (``mnemoray.memory.store.ops.rebuild``).

A lost tombstone file is reported and not repaired: dropping it would bring
forgotten memories back. Restore it from a backup.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.files import file_lock
from mnemoray.memory.store.index import IndexKind, build_index, write_index
from mnemoray.memory.store.layout import (
    LEDGER_DIR,
    LOCK,
    MANIFEST,
    QUARANTINE_DIR,
    TOMBSTONES_DIR,
    faiss_path,
    parquet_path,
)
from mnemoray.memory.store.manifest import Manifest, data_files, load_manifest, write_manifest
from mnemoray.memory.store.ops.file_checks import (
    DAMAGED_DIR,
    check_index,
    count_ledger,
    read_segment_table,
    set_aside,
)
from mnemoray.memory.store.rows import EMBEDDING
from mnemoray.memory.store.tombstones import read_tombstones

Key = tuple[int, str]  # (shard, segment name)


@dataclass
class Findings:
    """What ``check_store`` found; ``lines`` holds one line per problem."""

    manifest: Manifest | None = None
    manifest_problem: str | None = None  # missing (with data) or unreadable
    bad_segments: dict[Key, str] = field(default_factory=dict)  # Parquet unusable
    bad_indexes: dict[Key, str] = field(default_factory=dict)  # Parquet fine, FAISS not
    bad_ledger: dict[str, str] = field(default_factory=dict)
    bad_tombstones: dict[str, str] = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        out = [self.manifest_problem] if self.manifest_problem else []
        out += [f"segment {n} (shard {s}): {why}" for (s, n), why in self.bad_segments.items()]
        out += [f"index {n} (shard {s}): {why}" for (s, n), why in self.bad_indexes.items()]
        out += [f"ledger {n}: {why}" for n, why in self.bad_ledger.items()]
        out += [f"tombstones {n}: {why}" for n, why in self.bad_tombstones.items()]
        return out

    @property
    def healthy(self) -> bool:
        return not self.lines


@dataclass
class DoctorReport:
    root: Path
    problems: list[str]  # as found, before any repair
    repaired: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # problems still there after the repair
    reingest: list[str] = field(default_factory=list)  # "app/user/session" to ingest again
    version: int | None = None  # manifest version after the run

    @property
    def healthy(self) -> bool:
        return not self.left

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": str(self.root),
            "problems": self.problems,
            "repaired": self.repaired,
            "left": self.left,
            "reingest": self.reingest,
            "version": self.version,
            "healthy": self.healthy,
        }


def check_store(root: Path) -> Findings:
    found = Findings()
    try:
        found.manifest = load_manifest(root)
    except StoreCorrupt as exc:
        found.manifest_problem = str(exc)
        return found
    m = found.manifest
    if m is None:
        files = data_files(root)
        if files:
            found.manifest_problem = (
                f"manifest: {MANIFEST} is missing but {len(files)} store file(s) are there"
            )
        return found
    dim = m.dim or 0
    for shard, entries in enumerate(m.segments):
        for e in entries:
            try:
                read_segment_table(parquet_path(root, shard, e.name), e.rows, dim)
            except StoreCorrupt as exc:
                found.bad_segments[(shard, e.name)] = str(exc)
                continue
            if e.index:
                why = check_index(faiss_path(root, shard, e.name), e.rows)
                if why:
                    found.bad_indexes[(shard, e.name)] = why
    for name in m.ledger:
        path = root / LEDGER_DIR / name
        try:
            pq.read_table(path, columns=["session_hash"])
        except FileNotFoundError:
            found.bad_ledger[name] = "the file is missing"
        except (OSError, pa.ArrowException) as exc:
            found.bad_ledger[name] = f"the file is unreadable ({exc})"
    for name in m.tombstones:
        try:
            read_tombstones([root / TOMBSTONES_DIR / name])
        except StoreCorrupt as exc:
            found.bad_tombstones[name] = (
                f"{exc.reason.split('; run ')[0]}; not repaired: "
                f"dropping it would bring forgotten memories back, "
                f"restore it from a backup"
            )
    return found


def sessions_in(path: Path) -> list[str] | None:
    """``app/user/session`` of the rows still readable in a damaged segment (None: none are)."""
    try:
        table = pq.read_table(path, columns=["app_name", "user_id", "session_id"])
    except (OSError, pa.ArrowException):
        return None
    rows = zip(*(table[c].to_pylist() for c in ("app_name", "user_id", "session_id")), strict=True)
    return sorted({"/".join(r) for r in rows})


def _repair_listed(root: Path, found: Findings, report: DoctorReport) -> None:
    """Fix segments, indexes and ledger files of a readable manifest, in one commit."""
    m = found.manifest
    assert m is not None
    dim, stamp = m.dim or 0, time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for shard, name in found.bad_indexes:
        entry = next(e for e in m.segments[shard] if e.name == name)
        table = pq.read_table(parquet_path(root, shard, name), columns=[EMBEDDING])
        vectors = table[EMBEDDING].combine_chunks().flatten().to_numpy().reshape(-1, dim)
        kind = cast("IndexKind", entry.index or "auto")  # the manifest names one
        write_index(build_index(vectors, kind), faiss_path(root, shard, name))
        report.repaired.append(
            f"index {name} (shard {shard}): rebuilt from the Parquet vectors ({len(vectors)} rows)"
        )
    for (shard, name), why in found.bad_segments.items():
        ppath = parquet_path(root, shard, name)
        sessions = sessions_in(ppath) if ppath.is_file() else None
        m.segments[shard] = [e for e in m.segments[shard] if e.name != name]
        set_aside(root, ppath, stamp)
        set_aside(root, faiss_path(root, shard, name), stamp)
        named = (
            f"sessions to re-ingest: {', '.join(sessions)}"
            if sessions
            else f"its sessions cannot be read; re-ingest the tenants of shard {shard}"
        )
        report.reingest += sessions or []
        report.repaired.append(
            f"segment {name} (shard {shard}): quarantined under "
            f"{QUARANTINE_DIR}/{DAMAGED_DIR}/{stamp}/ ({why}); {named}"
        )
    lost_ledger = set(found.bad_ledger)
    if found.bad_segments and m.ledger:
        lost_ledger = set(m.ledger)  # which hashes fed the segment is not recorded
        report.repaired.append(
            f"ledger: {len(m.ledger)} file(s) set aside so the next "
            f"backfill processes every session again (memories already "
            f"stored are skipped)"
        )
    elif lost_ledger:
        report.repaired.append(
            f"ledger: {len(lost_ledger)} lost file(s) dropped (raw-row "
            f"hashes cannot be rebuilt from segments); the next backfill "
            f"processes their sessions again and stores no duplicates"
        )
    for name in lost_ledger:
        set_aside(root, root / LEDGER_DIR / name, stamp)
    if lost_ledger or found.bad_segments:
        m.ledger = [n for n in m.ledger if n not in lost_ledger]
        m.ledger_sessions = count_ledger(root, m.ledger)
    if found.bad_indexes or found.bad_segments or lost_ledger:
        m.version += 1  # readers reload; tombstones keep applying to older segments
        write_manifest(root, m)


def diagnose(root: Path) -> DoctorReport:
    found = check_store(root)
    return DoctorReport(
        root,
        found.lines,
        left=found.lines,
        version=found.manifest.version if found.manifest else None,
    )


def repair(
    root: Path, shards: int | None = None, embedding_model: str | None = None
) -> DoctorReport:
    """Check, repair what can be repaired (see the module doc), check again."""
    from mnemoray.memory.store.ops.rebuild import rebuild_manifest

    with file_lock(root / LOCK):
        found = check_store(root)
        report = DoctorReport(root, found.lines)
        if found.manifest_problem:
            report.repaired += rebuild_manifest(root, shards, embedding_model)
            found = check_store(root)
        if found.manifest is not None:
            _repair_listed(root, found, report)
        after = check_store(root)
    report.left = after.lines
    report.version = after.manifest.version if after.manifest else None
    return report


__all__ = ["DoctorReport", "Findings", "check_store", "diagnose", "repair"]
