"""Recall filters: what a recall may return (session, kinds, time range, agent view),
as masks applied before ranking, and the errors of bad retrieval input."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mnemoray.errors import InvalidInput
from mnemoray.memory.records.agent_names import check_agent_name
from mnemoray.memory.records.kinds import MEMORY_KINDS
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import EventError, parse_timestamp


class RetrievalError(InvalidInput):
    """Bad retrieval input (config, filters, query); ``field`` names it."""


def _time(value: Any, name: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_timestamp(value, name)
    except EventError as exc:
        raise RetrievalError(exc.reason, field=exc.field) from exc


@dataclass(frozen=True)
class RecallFilters:
    """Restrict recall before ranking.

    ``session_id``: only that session's records. ``kinds``: only these
    record kinds. ``after`` / ``before`` (epoch seconds or ISO-8601,
    inclusive): only records whose event time span
    [event_time_start, event_time_end] overlaps [after, before], the span as
    :func:`event_times` reads it (one end missing: the other; both: created_at).
    ``reference_time`` (epoch seconds or ISO-8601): not a filter but the "now" a query's
    relative times ("last May") are read against (default: the time of the recall).
    """

    session_id: str | None = None
    after: float | None = None
    before: float | None = None
    kinds: tuple[str, ...] | None = None
    # Not a filter but whose view (mnemoray.memory.store.scopes): the shared memories plus this
    # agent's own; None: the shared ones only. Carried here so every edge passes it along.
    agent_name: str | None = None
    reference_time: float | None = None

    def __post_init__(self) -> None:
        if self.agent_name is not None:
            check_agent_name(self.agent_name, RetrievalError, "filters.agent_name")
            object.__setattr__(self, "agent_name", self.agent_name or None)
        if self.session_id is not None and (
            not isinstance(self.session_id, str) or not self.session_id
        ):
            raise RetrievalError("must be a non-empty string", field="filters.session_id")
        object.__setattr__(self, "after", _time(self.after, "filters.after"))
        object.__setattr__(self, "before", _time(self.before, "filters.before"))
        object.__setattr__(
            self, "reference_time", _time(self.reference_time, "filters.reference_time")
        )
        if self.after is not None and self.before is not None and self.after > self.before:
            raise RetrievalError("after is later than before", field="filters")
        if self.kinds is not None:
            kinds = (self.kinds,) if isinstance(self.kinds, str) else self.kinds
            if not isinstance(kinds, Iterable):
                raise RetrievalError("expected a list of memory kinds", field="filters.kinds")
            kinds = tuple(kinds)
            for kind in kinds:
                if kind not in MEMORY_KINDS:
                    raise RetrievalError(
                        f"{kind!r} is not one of {', '.join(MEMORY_KINDS)}", field="filters.kinds"
                    )
            object.__setattr__(self, "kinds", kinds)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> RecallFilters:
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise RetrievalError(f"expected an object, got {type(raw).__name__}", field="filters")
        unknown = set(raw) - {
            "session_id",
            "after",
            "before",
            "kinds",
            "agent_name",
            "reference_time",
        }
        if unknown:
            raise RetrievalError(
                "unknown filter (known: "
                "session_id, after, before, kinds, agent_name, "
                "reference_time)",
                field=f"filters.{sorted(unknown)[0]}",
            )
        return cls(**raw)

    @classmethod
    def of(cls, value: RecallFilters | Mapping[str, Any] | None) -> RecallFilters:
        return value if isinstance(value, RecallFilters) else cls.from_dict(value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "after": self.after,
            "before": self.before,
            "kinds": list(self.kinds) if self.kinds is not None else None,
            "agent_name": self.agent_name,
            "reference_time": self.reference_time,
        }

    @property
    def empty(self) -> bool:
        """No row filter (``agent_name`` is a view, applied by :func:`rank_candidates`)."""
        return (
            self.session_id is None
            and self.after is None
            and self.before is None
            and self.kinds is None
        )

    def mask(
        self, session_ids: np.ndarray, kinds: np.ndarray, t_start: np.ndarray, t_end: np.ndarray
    ) -> np.ndarray:
        """Keep-mask over aligned candidate arrays (times already with their fallbacks)."""
        keep = np.ones(len(t_end), dtype=bool)
        if self.session_id is not None:
            keep &= session_ids == self.session_id
        if self.kinds is not None:
            keep &= np.isin(kinds, list(self.kinds))
        if self.after is not None:
            keep &= t_end >= self.after
        if self.before is not None:
            keep &= t_start <= self.before
        return keep

    def mask_table(self, table: pa.Table) -> np.ndarray:
        """The same mask over a segment's Arrow rows (a snapshot ``mask_fn``)."""
        start, end = event_times(table)
        empty = np.empty(0, dtype=object)
        sessions = (
            table["session_id"].to_numpy(zero_copy_only=False)
            if self.session_id is not None
            else empty
        )
        kinds = table["kind"].to_numpy(zero_copy_only=False) if self.kinds is not None else empty
        return self.mask(sessions, kinds, start, end)


# A record's event span, in both shapes (tests/memory/records/test_event_span.py pins they
# agree): the remembered events' [event_time_start, event_time_end]; a missing end uses the other;
# both missing, created_at (the time it was stored).
def event_times(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) event times per row of ``table`` (the span rule above, vectorised)."""

    def floats(name: str) -> np.ndarray:
        return table[name].to_numpy(zero_copy_only=False).astype(np.float64)

    start, end, created = floats("event_time_start"), floats("event_time_end"), floats("created_at")
    start = np.where(np.isnan(start), end, start)
    end = np.where(np.isnan(end), start, end)
    return np.where(np.isnan(start), created, start), np.where(np.isnan(end), created, end)


def event_span(m: Memory) -> tuple[float, float]:
    """(start, end) event times of one record (the span rule above)."""
    start = m.event_time_start if m.event_time_start is not None else m.event_time_end
    end = m.event_time_end if m.event_time_end is not None else start
    if start is None or end is None:
        return m.created_at, m.created_at
    return start, end
