"""Forget records: what was deleted, as predicates over committed rows.

A tombstone hides matching rows of every segment committed *before* it
(``segment.version < tombstone.version``): forgetting a user removes what
the store held then, and memories from the user's later sessions show up
again. Because each tombstone is a plain predicate, a compaction merge can
drop the matching rows physically and then retire the tombstone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.errors import StoreCorrupt
from mnemoray.files import atomic_write_bytes
from mnemoray.memory.store.layout import new_name, repair_hint
from mnemoray.memory.store.segment import LoadedSegment

Scope = Literal["memory", "session", "user"]
SCOPES: tuple[str, ...] = get_args(Scope)


@dataclass(frozen=True)
class Tombstone:
    scope: Scope
    version: int  # manifest version that committed it
    at: float
    memory_id: str = ""
    app_name: str = ""
    user_id: str = ""
    session_id: str = ""
    # Why and by whom (eviction, a user's request, an edit); "" in stores written before.
    reason: str = ""
    actor: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Tombstone:
        if raw.get("scope") not in SCOPES:
            raise StoreCorrupt(
                f"tombstone: scope {raw.get('scope')!r} is not one of {', '.join(SCOPES)}"
            )
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known)
        if unknown:
            raise StoreCorrupt(f"tombstone: unknown field {unknown[0]!r}")
        return cls(**raw)

    def owned_by(self, app_name: str, user_id: str) -> bool:
        return (self.app_name, self.user_id) == (app_name, user_id)


def read_tombstones(paths: Iterable[Path]) -> list[Tombstone]:
    out: list[Tombstone] = []
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError as exc:
            raise StoreCorrupt(
                f"tombstone file listed in the manifest is missing: {path}; "
                f"{repair_hint(path.parent.parent)}"
            ) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreCorrupt(
                f"cannot read tombstone file {path} ({exc}); {repair_hint(path.parent.parent)}"
            ) from exc
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                out.append(Tombstone.from_dict(raw if isinstance(raw, dict) else {}))
            except (ValueError, TypeError, StoreCorrupt) as exc:
                raise StoreCorrupt(
                    f"tombstone file {path}:{lineno} is not a tombstone ({exc}); "
                    f"{repair_hint(path.parent.parent)}"
                ) from exc
    return out


# Forget records a compaction retired (their rows are gone) that say why or by whom:
# kept for inspection (``MemoryService.forgotten``). Outside the manifest, never served
# and never removed by ``gc``. One folder per owner (``forgotten/<owner hash>/``): a
# read touches that owner's files only, and forgetting the user drops the folder.
HISTORY_DIR = "forgotten"


def owner_dir(root: Path, app_name: str, user_id: str) -> Path:
    digest = hashlib.sha256(f"{app_name}\0{user_id}".encode()).hexdigest()[:24]
    return root / HISTORY_DIR / digest


def archive_retired(root: Path, tombstones: Iterable[Tombstone]) -> list[Path]:
    """Keep the retired ``tombstones`` that carry a reason or an actor, in a new history
    file per owner; records of an owner erased whole by a later tombstone of the batch
    are not kept (only the erasure is). Written before the compaction commits: a crash
    in between leaves records that are still live tombstones too, which
    :func:`forget_records` counts once."""
    batch = list(tombstones)
    erased: dict[tuple[str, str], int] = {}
    for t in batch:
        if t.scope == "user":
            key = (t.app_name, t.user_id)
            erased[key] = max(erased.get(key, t.version), t.version)
    owners: dict[tuple[str, str], list[Tombstone]] = {}
    for t in batch:
        if (t.reason or t.actor) and not (
            t.scope != "user" and t.version < erased.get((t.app_name, t.user_id), -1)
        ):
            owners.setdefault((t.app_name, t.user_id), []).append(t)
    _split_legacy(root)
    paths = []
    for (app_name, user_id), kept in owners.items():
        path = owner_dir(root, app_name, user_id) / f"{new_name('retired')}.jsonl"
        atomic_write_bytes(path, tombstone_lines(kept))
        paths.append(path)
    return paths


def _split_legacy(root: Path) -> None:
    """History files of stores written before the per-owner folders: split into them
    (each copy written before the shared file goes; a crash leaves duplicates, which
    :func:`forget_records` counts once)."""
    folder = root / HISTORY_DIR
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        owners: dict[tuple[str, str], list[Tombstone]] = {}
        for t in read_tombstones([path]):
            owners.setdefault((t.app_name, t.user_id), []).append(t)
        for (app_name, user_id), kept in owners.items():
            atomic_write_bytes(
                owner_dir(root, app_name, user_id) / path.name, tombstone_lines(kept)
            )
        path.unlink()


def drop_history(root: Path, app_name: str, user_id: str) -> int:
    """Delete the owner's retired forget records (the user was forgotten whole); how
    many files went."""
    _split_legacy(root)
    folder = owner_dir(root, app_name, user_id)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    for path in files:
        path.unlink()
    if folder.is_dir():
        folder.rmdir()
    return len(files)


def forget_records(
    root: Path, live: Iterable[Tombstone], app_name: str, user_id: str
) -> list[Tombstone]:
    """The owner's forget records, live and retired, each once, oldest first."""
    folder = owner_dir(root, app_name, user_id)
    legacy = root / HISTORY_DIR
    history = [
        *(sorted(folder.glob("*.jsonl")) if folder.is_dir() else []),
        *(sorted(legacy.glob("*.jsonl")) if legacy.is_dir() else []),
    ]
    seen: dict[tuple[Any, ...], Tombstone] = {}
    for t in [*read_tombstones(history), *live]:
        if t.owned_by(app_name, user_id):
            seen.setdefault(tuple(t.to_dict().values()), t)
    return sorted(seen.values(), key=lambda t: (t.version, t.at))


def tombstone_lines(tombstones: Iterable[Tombstone]) -> bytes:
    return "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in tombstones).encode(
        "utf-8"
    )


def dead_rows(segment: LoadedSegment, tombstones: Iterable[Tombstone]) -> np.ndarray | None:
    """Boolean mask of the segment's forgotten rows, or None if none are."""
    dead: np.ndarray | None = None
    ids: list[str] = []  # unscoped memory tombstones (stores written before owners were kept)
    for t in tombstones:
        if t.version <= segment.entry.version:
            continue
        if t.scope == "memory" and not t.app_name:
            ids.append(t.memory_id)
            continue
        span = segment.ranges.get((t.app_name, t.user_id))
        if span is None:
            continue
        if dead is None:
            dead = np.zeros(segment.rows, dtype=bool)
        start, end = span
        if t.scope == "user":
            dead[start:end] = True
        elif t.scope == "memory":
            # A memory id is unique only within its owner: hide it in that user's rows only.
            owned = segment.table["memory_id"].slice(start, end - start)
            dead[start:end] |= pc.equal(owned, t.memory_id).to_numpy(zero_copy_only=False)
        else:
            sessions = segment.table["session_id"].slice(start, end - start)
            dead[start:end] |= pc.equal(sessions, t.session_id).to_numpy(zero_copy_only=False)
    if ids:
        hit = pc.is_in(segment.table["memory_id"], value_set=pa.array(ids, pa.string()))
        hit_np = hit.to_numpy(zero_copy_only=False)
        if hit_np.any():
            dead = hit_np if dead is None else dead | hit_np
    return dead
