"""Which copy of a session the store keeps, and which stored records a copy replaces.

A session's copies are ordered by :func:`session_version` (event count, then update
time), which every distilled record carries (:func:`stamp_version`): an older copy
read after a newer one (a later batch, file, run or replica) is recorded as
processed and replaces nothing. A newer copy keeps the identical records, adds the
new ones and forgets what they replace (:func:`superseded_ids`). Shared by the
online service and both backfill engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.sessions.session import Session

# Kinds a newer version of a session replaces outright (one current summary).
REPLACED_KINDS = frozenset({"session_summary", "fact"})
# Kinds replaced only when the new records cover all their events (the grown last chunk).
COVERED_KINDS = frozenset({"chunk", "compaction_summary"})

SessionKey = tuple[str, str, str]
SessionVersion = tuple[int, float]


# -- session versions ----------------------------------------------------------------
def session_version(session: Session) -> SessionVersion:
    """How new a copy of a session is: its event count (events are append-only: the
    session store's own version), then its update time. Never the order copies are
    read in, and not the update time first: parsing fills a missing one with "now"."""
    return (len(session.events), float(session.updated_at))


def stamp_version(records: Sequence[Memory], session: Session) -> list[Memory]:
    """``records`` marked with the version of the session copy they were distilled from."""
    events, at = session_version(session)
    return [m.with_derived(session_events=events, session_updated_at=at) for m in records]


def record_version(memory: Memory) -> SessionVersion | None:
    """The session version a record carries (None: a raw memory or an old store's row)."""
    if memory.session_events is None or memory.session_updated_at is None:
        return None
    return (memory.session_events, memory.session_updated_at)


def stored_version(snap: StoreSnapshot, session_key: SessionKey) -> SessionVersion | None:
    """The newest version among the session's live rows; None when none carries one."""
    versions = [
        (r["session_events"], r["session_updated_at"])
        for r in stored_session_rows(snap, *session_key)
        if r["session_events"] is not None and r["session_updated_at"] is not None
    ]
    return max(versions) if versions else None


def is_older_copy(
    snap: StoreSnapshot, session_key: SessionKey, version: SessionVersion | None
) -> bool:
    """Whether the store already holds a newer copy of the session than ``version``: such a
    copy is recorded as processed but replaces nothing. Unknown versions never block."""
    if version is None:
        return False
    stored = stored_version(snap, session_key)
    return stored is not None and version < stored


def stored_session_rows(
    snap: StoreSnapshot, app: str, user: str, session_id: str
) -> list[dict[str, Any]]:
    """The session's stored, unforgotten rows (id, kind, hash, source ids); user's shard only."""
    out: list[dict[str, Any]] = []
    for seg, (start, end) in snap.user_spans(app, user):
        sessions = seg.table["session_id"].slice(start, end - start).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(sessions == session_id)
        dead = snap.forgotten(seg)
        if dead is not None:
            rows = rows[~dead[start + rows]]
        if len(rows):
            cols = [
                "memory_id",
                "kind",
                "content_hash",
                "source_event_ids",
                "session_events",
                "session_updated_at",
                "edited_at",
            ]
            out.extend(seg.table.select(cols).take(start + rows).to_pylist())
    return out


def superseded_ids(
    snap: StoreSnapshot, session_key: tuple[str, str, str], records: Sequence[Memory]
) -> list[str]:
    """Stored records of a session that its newly distilled ``records`` replace.

    The session's previous ``session_summary`` and ``fact`` records not among
    the new ones, and chunks / compaction summaries whose events the new
    records of that kind all cover (the last chunk grew). Identical records
    (same content hash) and edited ones (``mnemoray.memory.records.edit``) always stay.
    """
    keep = {m.content_hash for m in records}
    covered: dict[str, set[str]] = {k: set() for k in COVERED_KINDS}
    for m in records:
        if m.kind in covered:
            covered[m.kind].update(m.source_event_ids)
    out = []
    for row in stored_session_rows(snap, *session_key):
        if row["content_hash"] in keep or row["edited_at"] is not None:
            continue  # identical, or a user's correction: never replaced by re-distillation
        ids = row["source_event_ids"] or []
        if row["kind"] in REPLACED_KINDS or (
            row["kind"] in COVERED_KINDS and ids and set(ids) <= covered[row["kind"]]
        ):
            out.append(row["memory_id"])
    return out


__all__ = [
    "COVERED_KINDS",
    "REPLACED_KINDS",
    "SessionVersion",
    "is_older_copy",
    "record_version",
    "session_version",
    "stamp_version",
    "stored_session_rows",
    "stored_version",
    "superseded_ids",
]
