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
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from mnemoray.memory import consolidate, evict
from mnemoray.memory.consolidation_ledger import ConsolidationLedger
from mnemoray.memory.hooks import MemoryEvent

if TYPE_CHECKING:
    from mnemoray.memory.service import MemoryService

log = logging.getLogger(__name__)

SOURCE_FORGOTTEN = "source forgotten"
_HOUSEKEEPING_ACTORS = frozenset({consolidate.ACTOR, evict.ACTOR})


class ForgetCascade:
    def __init__(self, service: MemoryService, ledger_path: str | Path | None = None) -> None:
        self.service = service
        self.ledger = ConsolidationLedger(ledger_path) if ledger_path is not None \
            else ConsolidationLedger.of_store(service.store.root)
        self.cascaded = 0  # summaries forgotten so far (stats)

    def attach(self) -> ForgetCascade:
        self.service.on_memory_forgotten(self.on_forgotten)
        self.service.hooks.add_stats(lambda: {"summaries_cascaded": self.cascaded})
        return self

    def close(self) -> None:
        self.ledger.close()

    def on_forgotten(self, event: MemoryEvent) -> None:
        from mnemoray.memory.service import SUPERSEDED

        if (event.scope == "user" or event.actor in _HOUSEKEEPING_ACTORS
                or event.reason == SUPERSEDED or not event.memory_ids):
            return
        gone = set(event.memory_ids)
        rows = self.service.snapshot().rows_for_user(event.app_name, event.user_id)
        hit = [m.memory_id for m in rows if m.kind == consolidate.CONSOLIDATED_KIND
               and gone.intersection(m.source_event_ids)]
        if not hit:
            return
        n = self.service.forget_memories(event.app_name, event.user_id, hit,
                                         reason=SOURCE_FORGOTTEN, actor=consolidate.ACTOR)
        self.ledger.release(event.app_name, event.user_id, hit)
        self.cascaded += n
        log.info("consolidation: %d summaries of %s/%s forgotten with a source (%s)", n,
                 event.app_name, event.user_id, event.reason or event.scope)
