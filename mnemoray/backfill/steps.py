"""The steps of a backfill, shared by both engines (in process and Ray Data).

    read rows -> validate_rows -> skip_processed (ledger) -> distill_sessions
              -> embed_sessions -> commit (``mnemoray.backfill.commit``: drop older
                 copies, forget what the batch supersedes, then memories + ledger
                 in one commit)

Which copy of a session wins is decided by its version (``session_version``: event
count, then ``updated_at``), which every distilled record carries, never by the
order copies are read in: within a batch (``mark_current``) and against the store
(``older_copies``, at commit), so batch, file and run boundaries change nothing.

A bad row (unparseable, invalid session, a session the summarizer fails on)
goes to the store's quarantine with its location and reason, never silently
dropped. A session's ledger key is the hash of its RAW archive row
(canonical JSON), not of the parsed Session: parsing may fill defaults (event
ids, timestamps) that differ between runs. Memories and ledger entries of a
batch are committed together, so a killed run resumes without duplicates and
an unchanged re-run adds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any

from mnemoray.backfill.archive import ArchiveRow
from mnemoray.embedders import Embedder
from mnemoray.errors import StoreError
from mnemoray.graph.extract import SessionExtract
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import embed_memories
from mnemoray.memory.store.graph.commit import safe_extract
from mnemoray.memory.store.protocol import MemoryBackend
from mnemoray.memory.store.scopes import ScopePolicy
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.supersede import (
    is_older_copy,
    record_version,
    session_version,
    stamp_version,
    superseded_ids,
)
from mnemoray.memory.store.writes import session_content_hash
from mnemoray.sessions.session import Session
from mnemoray.summarizers import Summarizer


@dataclass(frozen=True)
class SessionItem:
    """One valid archive row on its way through the steps."""

    location: str
    raw_hash: str  # ledger key: hash of the raw row
    session: Session
    raw: Any = None  # the archive row as read (quarantined as is if distilling fails)
    memories: tuple[Memory, ...] = ()
    current: bool = True  # False: an older copy of a session also in this batch
    # Its entity graph evidence, read where it is distilled (later stages drop the events).
    graph: SessionExtract | None = None


Quarantined = dict[str, Any]  # {"location", "reason", "raw"}


# -- steps ---------------------------------------------------------------------
def validate_rows(rows: Iterable[ArchiveRow]) -> tuple[list[SessionItem], list[Quarantined]]:
    """Split archive rows into valid sessions (with their raw-row hash) and rejects."""
    good: list[SessionItem] = []
    bad: list[Quarantined] = []
    for row in rows:
        if row.session is None:
            bad.append(
                {"location": row.location, "reason": row.error or "unreadable row", "raw": row.raw}
            )
            continue
        try:
            raw_hash = session_content_hash(row.raw)
        except StoreError as exc:
            bad.append({"location": row.location, "reason": str(exc), "raw": row.raw})
            continue
        except Exception as exc:  # any per-row failure (a lone surrogate, ...): quarantine it
            bad.append(
                {
                    "location": row.location,
                    "reason": f"cannot hash the row: {type(exc).__name__}: {exc}",
                    "raw": row.raw,
                }
            )
            continue
        good.append(SessionItem(row.location, raw_hash, row.session, row.raw))
    return good, bad


def skip_processed(
    store: MemoryBackend,
    items: Sequence[SessionItem],
) -> tuple[list[SessionItem], int]:
    """Drop sessions the ledger already holds, and repeats of a row within ``items``."""
    done = store.ledger_contains([i.raw_hash for i in items]) if items else set()
    todo: list[SessionItem] = []
    seen: set[str] = set()
    for item in items:
        if item.raw_hash in done or item.raw_hash in seen:
            continue
        seen.add(item.raw_hash)
        todo.append(item)
    return todo, len(items) - len(todo)


def mark_current(items: Sequence[SessionItem]) -> list[SessionItem]:
    """Of several copies of one session in a batch, only the newest (``session_version``;
    the one read last on a tie) is distilled."""
    best: dict[tuple[str, str, str], int] = {}
    for i, item in enumerate(items):
        s = item.session
        j = best.get(s.key)
        if j is None or (session_version(s), i) >= (session_version(items[j].session), j):
            best[s.key] = i
    return [
        item if best[item.session.key] == i else replace(item, current=False)
        for i, item in enumerate(items)
    ]


def distill_sessions(
    items: Sequence[SessionItem],
    summarizer: Summarizer | None,
    *,
    chunk_turns: int = 4,
    ttl_s: float | None = None,
    summarize: bool = True,
    scopes: ScopePolicy | None = None,
) -> tuple[list[SessionItem], list[Quarantined]]:
    """Distill each current session; one that fails goes to quarantine.
    ``summarize=False``: raw chunks only (``summarizer`` may be None, never called).
    ``scopes``: whose memories they are, per app (``memory_scope: agent``: the session's
    one agent; a session of several agents is quarantined, naming why), as online."""
    from mnemoray.memory.records.distill import distill_session
    from mnemoray.memory.store.scopes import NO_SHARING, session_agent, stamp_agent

    scopes = scopes or NO_SHARING

    out: list[SessionItem] = []
    bad: list[Quarantined] = []
    for item in mark_current(items):
        if not item.current:
            out.append(item)  # ledgered as processed; its newer copy carries the records
            continue
        try:
            agent = session_agent(item.session, scopes.memory_scope(item.session.app_name))
            memories = stamp_version(
                stamp_agent(
                    distill_session(
                        item.session,
                        summarizer,
                        chunk_turns=chunk_turns,
                        ttl_s=ttl_s,
                        summarize=summarize,
                    ),
                    agent,
                ),
                item.session,
            )
        except Exception as exc:  # any backend, any error: the row is kept, with why
            bad.append(
                {
                    "location": item.location,
                    "reason": f"distill failed: {type(exc).__name__}: {exc}",
                    "raw": item.raw if item.raw is not None else item.session.to_dict(),
                }
            )
            continue
        out.append(
            replace(item, memories=tuple(memories), graph=safe_extract(item.session, memories))
        )
    return out, bad


def embed_sessions(
    items: Sequence[SessionItem], embedder: Embedder | None, batch_size: int | None = None
) -> list[SessionItem]:
    """Embed every memory of the batch in one encode call."""
    flat = [m for item in items for m in item.memories]
    embedded = iter(embed_memories(flat, embedder, batch_size=batch_size))
    return [replace(item, memories=tuple(islice(embedded, len(item.memories)))) for item in items]


def older_copies(
    snap: StoreSnapshot,
    sessions: Iterable[tuple[tuple[str, str, str], Sequence[Memory]]],
) -> set[tuple[str, str, str]]:
    """Of (session key, new records) pairs, the sessions the snapshot holds a newer copy
    of (by the version the records carry): their records must replace nothing."""
    return {
        key
        for key, records in sessions
        if records and is_older_copy(snap, key, record_version(records[0]))
    }


def superseded_for(
    snap: StoreSnapshot,
    sessions: Iterable[tuple[tuple[str, str, str], Sequence[Memory]]],
) -> list[tuple[str, str, str]]:
    """``superseded_ids`` of each (session key, new records) pair, on one snapshot, as
    (app, user, memory_id): ids are unique per user, so each names its owner."""
    out: list[tuple[str, str, str]] = []
    for key, records in sessions:
        if records and snap.user_spans(key[0], key[1]):
            out.extend((key[0], key[1], i) for i in superseded_ids(snap, key, records))
    return out


__all__ = [
    "Quarantined",
    "SessionItem",
    "distill_sessions",
    "embed_sessions",
    "mark_current",
    "older_copies",
    "skip_processed",
    "superseded_for",
    "validate_rows",
]
