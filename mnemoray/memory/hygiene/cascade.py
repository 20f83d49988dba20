"""Forgetting reaches consolidated summaries: provenance used the other way round.

When a user's memory is forgotten on purpose (a user's request, a forget by query, an
edit that replaces wrong words), a consolidated summary that merged it would still
repeat it. The ``on_memory_forgotten`` hook here forgets every live summary whose
``source_event_ids`` name a memory that went (reason ``source forgotten``) and
releases that summary's other originals from the consolidation ledger, so the next
consolidation run merges them again without the forgotten one (and with an edit's
corrected text). Forgets that are housekeeping keep the summary: an original that
expired as consolidated, one evicted by a limit, one superseded by a newer copy of
its session. A whole user forgotten takes the summaries with it already.

The cascade runs on the forgetting thread (never dropped with a full hook queue). What
it cannot see is caught later: a summary written while one of its originals was being
forgotten is dropped right after its write (:func:`drop_orphans`), and each
consolidation run first forgets the summaries of originals forgotten on purpose
elsewhere, e.g. by a process without the cascade (:func:`catch_up`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mnemoray.memory.hygiene import evict
from mnemoray.memory.hygiene.ledger import ACTOR, CONSOLIDATED_KIND, ConsolidationLedger
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.hooks import MemoryEvent
from mnemoray.memory.store.tombstones import forget_records

if TYPE_CHECKING:
    from mnemoray.memory.service.service import MemoryService

log = logging.getLogger(__name__)

SOURCE_FORGOTTEN = "source forgotten"
_HOUSEKEEPING_ACTORS = frozenset({ACTOR, evict.ACTOR})


class ForgetCascade:
    def __init__(self, service: MemoryService, ledger_path: str | Path | None = None) -> None:
        self.service = service
        self.ledger = (
            ConsolidationLedger(ledger_path)
            if ledger_path is not None
            else ConsolidationLedger.of_store(service.store.root)
        )
        self.cascaded = 0  # summaries forgotten so far (stats)

    def attach(self) -> ForgetCascade:
        # On the forgetting thread, right after the forget: never lost to a full queue.
        self.service.hooks.register_sync("on_memory_forgotten", self.on_forgotten)
        self.service.hooks.add_stats(lambda: {"summaries_cascaded": self.cascaded})
        return self

    def close(self) -> None:
        self.ledger.close()

    def on_forgotten(self, event: MemoryEvent) -> None:
        if (
            event.scope == "user"
            or not purposeful(event.reason, event.actor)
            or not event.memory_ids
        ):
            return
        n = forget_summaries_of(
            self.service, self.ledger, event.app_name, event.user_id, set(event.memory_ids)
        )
        self.cascaded += n
        if n:
            log.info(
                "consolidation: %d summaries of %s/%s forgotten with a source (%s)",
                n,
                event.app_name,
                event.user_id,
                event.reason or event.scope,
            )


def purposeful(reason: str, actor: str) -> bool:
    """Whether a forget was meant (a user's request, a query, an edit), not housekeeping
    (an original expired as consolidated, evicted by a limit, superseded)."""
    from mnemoray.memory.service.service import SUPERSEDED

    return actor not in _HOUSEKEEPING_ACTORS and reason != SUPERSEDED


def forget_summaries_of(
    service: MemoryService, ledger: ConsolidationLedger, app_name: str, user_id: str, gone: set[str]
) -> int:
    """Forget the user's live summaries that merge any of ``gone`` and release their
    other originals from the ledger; how many summaries went."""
    service.reloader.refresh()
    rows = service.snapshot().rows_for_user(app_name, user_id)
    hit = [
        m.memory_id
        for m in rows
        if m.kind == CONSOLIDATED_KIND and gone.intersection(m.source_event_ids)
    ]
    if not hit:
        return 0
    n = service.forget_memories(app_name, user_id, hit, reason=SOURCE_FORGOTTEN, actor=ACTOR)
    ledger.release(app_name, user_id, hit)
    return n


def catch_up(
    service: MemoryService, ledger: ConsolidationLedger, app_name: str, user_id: str
) -> int:
    """Forget the user's live summaries that merge a memory forgotten on purpose since
    (a cascade missed: another process without it, a crash in between); how many.
    Run at the start of each consolidation of the user."""
    snap = service.snapshot()
    rows = snap.rows_for_user(app_name, user_id)
    sources = {i for m in rows if m.kind == CONSOLIDATED_KIND for i in m.source_event_ids}
    missing = sources - {m.memory_id for m in rows}
    if not missing:
        return 0
    records = [
        t
        for t in forget_records(service.store.root, snap.tombstones, app_name, user_id)
        if purposeful(t.reason, t.actor)
    ]
    gone = {t.memory_id for t in records if t.scope == "memory"} & missing
    sessions = {t.session_id for t in records if t.scope == "session"}
    if sessions and missing - gone:  # which session each missing source was in
        for seg, (start, end) in snap.user_spans(app_name, user_id):
            ids = seg.table["memory_id"].slice(start, end - start).to_pylist()
            sids = seg.table["session_id"].slice(start, end - start).to_pylist()
            gone.update(
                i for i, sid in zip(ids, sids, strict=True) if i in missing and sid in sessions
            )
    return forget_summaries_of(service, ledger, app_name, user_id, gone) if gone else 0


def drop_orphans(
    service: MemoryService,
    ledger: ConsolidationLedger,
    app_name: str,
    user_id: str,
    merged: Sequence[tuple[Memory, Sequence[Memory]]],
) -> list[tuple[Memory, Sequence[Memory]]]:
    """After summaries were written: forget those whose originals are no longer all
    live (forgotten while the group was summarized: the cascade found no summary then);
    the groups that stand. A forget after this check finds the summary written."""
    service.reloader.refresh()
    snap = service.snapshot()
    owner = (app_name, user_id)
    kept: list[tuple[Memory, Sequence[Memory]]] = []
    orphans: list[tuple[Memory, Sequence[Memory]]] = []
    for record, group in merged:
        live = all(snap.get(m.memory_id, owner) is not None for m in group)
        (kept if live else orphans).append((record, group))
    if orphans:
        n = service.forget_memories(
            app_name,
            user_id,
            [r.memory_id for r, _ in orphans],
            reason=SOURCE_FORGOTTEN,
            actor=ACTOR,
        )
        ledger.release(app_name, user_id, [r.memory_id for r, _ in orphans])
        log.info(
            "consolidation: %d summaries of %s/%s forgotten at once: a source went "
            "while they were written",
            n,
            app_name,
            user_id,
        )
    return kept
