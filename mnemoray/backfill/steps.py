"""Backfill: distill an archive of sessions into a memory store, in process.

The steps are separate functions so the Ray Data pipeline can run the same
ones as map stages:

    read rows -> validate_rows -> skip_processed (ledger) -> distill_sessions
              -> embed_sessions -> superseded_in_batch (forget replaced records)
              -> write_sessions (memories + ledger, one commit)

A bad row (unparseable, invalid session, a session the summarizer fails on)
goes to the store's quarantine with its location and reason, never silently
dropped. A session's ledger key is the hash of its RAW archive row
(canonical JSON), not of the parsed Session: parsing may fill defaults (event
ids, timestamps) that differ between runs. Memories and ledger entries of a
batch are committed together, so a killed run resumes without duplicates and
an unchanged re-run adds nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from mnemoray.archive import ArchiveRow, iter_archive
from mnemoray.embedders import Embedder
from mnemoray.memory.manifest import StoreError
from mnemoray.memory.record import Memory
from mnemoray.memory.service import (
    embed_memories,
    resolve_embedder,
    store_model,
    superseded_ids,
)
from mnemoray.memory.snapshot import StoreSnapshot
from mnemoray.memory.store import MemoryStore, WriteResult, session_content_hash
from mnemoray.session import Session
from mnemoray.summarizers import Summarizer, get_summarizer

log = logging.getLogger(__name__)

DEFAULT_BATCH_SESSIONS = 256


@dataclass(frozen=True)
class BackfillReport:
    sessions_read: int = 0  # archive rows read, good or bad
    skipped: int = 0  # sessions already in the ledger (or repeated in this run)
    quarantined: int = 0  # rows sent to quarantine by this run
    memories_written: int = 0  # memory rows committed by this run
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __add__(self, other: BackfillReport) -> BackfillReport:
        return BackfillReport(**{k: v + getattr(other, k) for k, v in asdict(self).items()})


@dataclass(frozen=True)
class SessionItem:
    """One valid archive row on its way through the steps."""

    location: str
    raw_hash: str  # ledger key: hash of the raw row
    session: Session
    raw: Any = None  # the archive row as read (quarantined as is if distilling fails)
    memories: tuple[Memory, ...] = ()
    current: bool = True  # False: an older copy of a session also in this batch


Quarantined = dict[str, Any]  # {"location", "reason", "raw"}


# -- steps ---------------------------------------------------------------------
def validate_rows(rows: Iterable[ArchiveRow]) -> tuple[list[SessionItem], list[Quarantined]]:
    """Split archive rows into valid sessions (with their raw-row hash) and rejects."""
    good: list[SessionItem] = []
    bad: list[Quarantined] = []
    for row in rows:
        if row.session is None:
            bad.append({"location": row.location, "reason": row.error or "unreadable row",
                        "raw": row.raw})
            continue
        try:
            raw_hash = session_content_hash(row.raw)
        except StoreError as exc:
            bad.append({"location": row.location, "reason": str(exc), "raw": row.raw})
            continue
        good.append(SessionItem(row.location, raw_hash, row.session, row.raw))
    return good, bad


def skip_processed(store: MemoryStore, items: Sequence[SessionItem],
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
    """Of several copies of one session in a batch, only the newest is distilled."""
    best: dict[tuple[str, str, str], int] = {}
    for i, item in enumerate(items):
        s = item.session
        j = best.get(s.key)
        if j is None or (s.updated_at, len(s.events), i) >= (
                items[j].session.updated_at, len(items[j].session.events), j):
            best[s.key] = i
    return [item if best[item.session.key] == i else replace(item, current=False)
            for i, item in enumerate(items)]


def distill_sessions(items: Sequence[SessionItem], summarizer: Summarizer, *,
                     chunk_turns: int = 4, ttl_s: float | None = None,
                     ) -> tuple[list[SessionItem], list[Quarantined]]:
    """Distill each current session; one that fails goes to quarantine."""
    from mnemoray.memory.distill import distill_session

    out: list[SessionItem] = []
    bad: list[Quarantined] = []
    for item in mark_current(items):
        if not item.current:
            out.append(item)  # ledgered as processed; its newer copy carries the records
            continue
        try:
            memories = distill_session(item.session, summarizer, chunk_turns=chunk_turns,
                                       ttl_s=ttl_s)
        except Exception as exc:  # any backend, any error: the row is kept, with why
            bad.append({"location": item.location,
                        "reason": f"distill failed: {type(exc).__name__}: {exc}",
                        "raw": item.raw if item.raw is not None else item.session.to_dict()})
            continue
        out.append(replace(item, memories=tuple(memories)))
    return out, bad


def embed_sessions(items: Sequence[SessionItem], embedder: Embedder | None,
                   batch_size: int = 64) -> list[SessionItem]:
    """Embed every memory of the batch in one encode call."""
    flat = [m for item in items for m in item.memories]
    embedded = iter(embed_memories(flat, embedder, batch_size=batch_size))
    return [replace(item, memories=tuple(islice(embedded, len(item.memories))))
            for item in items]


def write_sessions(store: MemoryStore, items: Sequence[SessionItem], embedding_model: str,
                   dim: int, *, summarizer: str | None = None,
                   run_id: str | None = None) -> WriteResult:
    """Commit the batch's memories and all its ledger entries in one manifest write."""
    memories = [m for item in items for m in item.memories]
    hashes = [item.raw_hash for item in items]
    if not memories:
        added = store.ledger_add(hashes, run_id=run_id) if hashes else 0
        return WriteResult(store.manifest().version, 0, 0, (), added)
    return store.write_segment(memories, embedding_model, dim, session_hashes=hashes,
                               run_id=run_id, summarizer=summarizer)


def superseded_in_batch(store: MemoryStore, items: Sequence[SessionItem]) -> list[str]:
    """Stored records of the batch's sessions that their new records replace.

    Computed on the pre-write snapshot and forgotten before ``write_sessions``
    commits: a session re-archived with more events keeps one summary, and a
    run killed in between redoes the session (its ledger entry is not in yet).
    """
    return superseded_for(store.load(), [(item.session.key, item.memories) for item in items
                                         if item.current and item.memories])


def superseded_for(snap: StoreSnapshot,
                   sessions: Iterable[tuple[tuple[str, str, str], Sequence[Memory]]],
                   ) -> list[str]:
    """``superseded_ids`` of each (session key, new records) pair, on one snapshot."""
    out: list[str] = []
    for key, records in sessions:
        if records and snap.user_spans(key[0], key[1]):
            out.extend(superseded_ids(snap, key, records))
    return out


# -- the driver ------------------------------------------------------------------
def _batches(rows: Iterator[ArchiveRow], size: int) -> Iterator[list[ArchiveRow]]:
    while batch := list(islice(rows, size)):
        yield batch


def backfill(archive: str | Path, store_dir: str | Path, shards: int | None = None,
             summarizer: str | Summarizer = "extractive",
             embedder: str | Embedder | None = "default",
             batch_sessions: int = DEFAULT_BATCH_SESSIONS, *, run_id: str | None = None,
             ttl_s: float | None = None, chunk_turns: int = 4,
             progress: Callable[[BackfillReport], object] | None = None) -> BackfillReport:
    """Distill every session of ``archive`` into the store at ``store_dir``.

    Idempotent: sessions whose raw row is in the ledger are skipped, so a
    re-run adds nothing and a killed run resumes where it stopped.
    ``progress`` is called with the running totals after every batch.
    """
    if not isinstance(batch_sessions, int) or isinstance(batch_sessions, bool) \
            or batch_sessions < 1:
        raise ValueError(f"batch_sessions: must be a positive int, got {batch_sessions!r}")
    started = time.perf_counter()
    store = MemoryStore(store_dir, shards)
    summ = get_summarizer(summarizer) if isinstance(summarizer, str) else summarizer
    emb = resolve_embedder(store, embedder)
    run_id = run_id or uuid.uuid4().hex[:12]
    total = BackfillReport()
    for batch in _batches(iter_archive(archive), batch_sessions):
        t0 = time.perf_counter()
        items, bad = validate_rows(batch)
        todo, skipped = skip_processed(store, items)
        distilled, failed = distill_sessions(todo, summ, chunk_turns=chunk_turns, ttl_s=ttl_s)
        bad += failed
        if bad:
            store.quarantine(bad)
        embedded = embed_sessions(distilled, emb)
        replaced = superseded_in_batch(store, embedded)
        if replaced:  # before the commit: a run killed in between redoes these sessions
            store.forget(memory_ids=replaced)
        model, dim = store_model(store, emb)
        result = write_sessions(store, embedded, model, dim,
                                summarizer=getattr(summ, "name", None), run_id=run_id)
        total = total + BackfillReport(len(batch), skipped, len(bad), result.written,
                                       time.perf_counter() - t0)
        log.info("backfill batch: %s", total)
        if progress is not None:
            progress(total)
    return replace(total, seconds=round(time.perf_counter() - started, 3))


__all__ = ["BackfillReport", "SessionItem", "backfill", "distill_sessions", "embed_sessions",
           "mark_current", "skip_processed", "superseded_for", "superseded_in_batch",
           "validate_rows", "write_sessions"]
