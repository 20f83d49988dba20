"""Forget records: what was deleted, as predicates over committed rows.

A tombstone hides matching rows of every segment committed *before* it
(``segment.version < tombstone.version``): forgetting a user removes what
the store held then, and memories from the user's later sessions show up
again. Because each tombstone is a plain predicate, a compaction merge can
drop the matching rows physically and then retire the tombstone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.errors import StoreCorrupt
from mnemoray.memory.files import atomic_write_bytes
from mnemoray.memory.layout import new_name, repair_hint
from mnemoray.memory.segment import LoadedSegment

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
            raise StoreCorrupt(f"tombstone: scope {raw.get('scope')!r} is not one of "
                               f"{', '.join(SCOPES)}")
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
            raise StoreCorrupt(f"tombstone file listed in the manifest is missing: {path}; "
                               f"{repair_hint(path.parent.parent)}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreCorrupt(f"cannot read tombstone file {path} ({exc}); "
                               f"{repair_hint(path.parent.parent)}") from exc
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                out.append(Tombstone.from_dict(raw if isinstance(raw, dict) else {}))
            except (ValueError, TypeError, StoreCorrupt) as exc:
                raise StoreCorrupt(f"tombstone file {path}:{lineno} is not a tombstone ({exc}); "
                                   f"{repair_hint(path.parent.parent)}") from exc
    return out


# Forget records a compaction retired (their rows are gone) that say why or by whom:
# kept for inspection (``MemoryService.forgotten``). Outside the manifest, never served
# and never removed by ``gc``.
HISTORY_DIR = "forgotten"


def archive_retired(root: Path, tombstones: Iterable[Tombstone]) -> Path | None:
    """Keep the retired ``tombstones`` that carry a reason or an actor in a new history
    file. Written before the compaction commits: a crash in between leaves records that
    are still live tombstones too, which :func:`forget_records` counts once."""
    kept = [t for t in tombstones if t.reason or t.actor]
    if not kept:
        return None
    path = root / HISTORY_DIR / f"{new_name('retired')}.jsonl"
    atomic_write_bytes(path, tombstone_lines(kept))
    return path


def forget_records(root: Path, live: Iterable[Tombstone], app_name: str,
                   user_id: str) -> list[Tombstone]:
    """The owner's forget records, live and retired, each once, oldest first."""
    history = sorted((root / HISTORY_DIR).glob("*.jsonl")) if (root / HISTORY_DIR).is_dir() \
        else []
    seen: dict[tuple[Any, ...], Tombstone] = {}
    for t in [*read_tombstones(history), *live]:
        if t.owned_by(app_name, user_id):
            seen.setdefault(tuple(t.to_dict().values()), t)
    return sorted(seen.values(), key=lambda t: (t.version, t.at))


def tombstone_lines(tombstones: Iterable[Tombstone]) -> bytes:
    return "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n"
                   for t in tombstones).encode("utf-8")


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
