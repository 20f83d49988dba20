"""A record's event span has one rule in two shapes (mnemoray.memory.records.filters):
``event_span`` for one record and ``event_times`` over a segment's Arrow rows. They agree
on every combination of missing event times."""

from __future__ import annotations

import itertools

import numpy as np

from mnemoray.memory.records.filters import event_span, event_times
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service import service
from mnemoray.memory.store.rows import memories_to_table

CREATED = 1_700_000_000.0
START, END = 1_600_000_000.0, 1_600_000_500.0


def test_both_shapes_agree_on_every_combination_of_missing_times() -> None:
    records = [
        Memory(
            "app",
            "ana",
            "s1",
            "fact",
            f"fact {i}",
            event_time_start=start,
            event_time_end=end,
            created_at=CREATED,
        )
        for i, (start, end) in enumerate(itertools.product((START, None), (END, None)))
    ]
    starts, ends = event_times(memories_to_table(records, 0))
    spans = [event_span(m) for m in records]
    assert [(float(s), float(e)) for s, e in zip(starts, ends, strict=True)] == spans
    assert spans == [
        (START, END),  # both given
        (START, START),  # no end: the start
        (END, END),  # no start: the end
        (CREATED, CREATED),
    ]  # neither: when it was stored
    assert starts.dtype == ends.dtype == np.float64


def test_the_service_uses_the_one_rule() -> None:
    assert service.event_span is event_span
