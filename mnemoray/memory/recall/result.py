"""One recalled memory (``RecallResult``): its score, the signals and axes that found it,
the facts it states, and the one JSON form every surface (CLI, HTTP, MCP, agent tools)
shows of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from mnemoray.compiler.services import MemorySnippet
from mnemoray.graph.recall import StatedFact
from mnemoray.memory.records.record import Memory


@dataclass(frozen=True)
class RecallResult:
    """One recalled memory. ``signals``: raw value of each active signal (dense
    cosine, BM25 score, entity overlap, time in [0, 1] when the query has a time
    intent, recency in [0, 1]) and ``<signal>_rank`` for each signal that ranked it
    (1 = best). ``axes``: the axes that found or raised it
    (:func:`mnemoray.memory.recall.axes.found_by`). ``facts``: the typed facts it states, with
    their validity, where the user has an entity graph."""

    memory: Memory
    score: float
    signals: dict[str, float]
    axes: tuple[str, ...] = ()
    facts: tuple[StatedFact, ...] = ()
    #: What each signal added to ``score`` (``score == 1 + sum`` for a ranked record):
    #: the fusion's own terms (:func:`mnemoray.memory.recall.fusion.fuse`), shown on ``explain``.
    contributions: dict[str, float] = field(default_factory=dict)
    #: A chunk shown in the place of a better-ranked fact (or summary) of its session
    #: whose words it holds: that record's id; score, signals and facts are that
    #: record's (:mod:`mnemoray.memory.recall.picking`).
    in_place_of: str | None = None
    #: A long turn's parts shown as one passage (:func:`mnemoray.memory.recall.picking.joined`):
    #: the ids of the parts joined to ``memory``'s, whose text holds them all in order.
    joined: tuple[str, ...] = ()

    @property
    def time(self) -> float:
        """When the remembered events happened (their end), else when it was stored."""
        m = self.memory
        return m.event_time_end if m.event_time_end is not None else m.created_at

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        """The one JSON form of a recalled memory: CLI, HTTP, MCP and agent tools.
        ``explain``: with ``contributions`` (what each signal added to the score)."""
        m = self.memory
        out = {
            "memory_id": m.memory_id,
            "app_name": m.app_name,
            "kind": m.kind,
            "text": m.text,
            "score": round(float(self.score), 6),
            "date": iso_date(self.time),
            "signals": dict(self.signals),
            "axes": list(self.axes),
            "topics": list(m.topics),
            "key_facts": list(m.key_facts),
            "provenance": {
                "session_id": m.session_id,
                "source_event_ids": list(m.source_event_ids),
                "event_time_start": m.event_time_start,
                "event_time_end": m.event_time_end,
                "created_at": m.created_at,
            },
        }
        # Outcomes, only where a summary had some (most records have none).
        for name in ("open_threads", "decisions", "commitments"):
            if getattr(m, name):
                out[name] = list(getattr(m, name))
        if m.agent_name:  # an agent-only memory (mnemoray.memory.store.scopes)
            out["agent_name"] = m.agent_name
        if self.facts:  # what it states, and whether that still holds
            out["facts"] = [
                {
                    "relation": f.relation,
                    "subject": f.subject,
                    "object": f.object,
                    "valid_from": iso_date(f.valid_from),
                    "valid_to": iso_date(f.valid_to),
                    "holds": f.holds,
                }
                for f in self.facts
            ]
        if self.in_place_of is not None:
            out["in_place_of"] = self.in_place_of
        if self.joined:
            out["joined"] = list(self.joined)
        if explain:
            out["contributions"] = dict(self.contributions)
        return out

    def snippet(self) -> MemorySnippet:
        """What the compiler shows the model of this memory."""
        return MemorySnippet.from_recalled(self.to_dict())


def iso_date(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")
