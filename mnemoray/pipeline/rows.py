"""The row format between pipeline stages.

Every stage after ``read`` passes Arrow batches with three columns:

- ``item``: one pickled :class:`mnemoray.backfill.steps.SessionItem` (the
  exact object the in-process backfill steps take and return), or null;
- ``stats``: null, or (on the last row of each stage batch) a JSON tally of
  what the batch did: rows ``read``, ``skipped`` (``ledger_hits`` of them: in
  the ledger already), ``quarantined``, busy ``seconds`` and ``cpu_seconds`` per stage,
  ``summarizer`` name. Rows that leave the flow (bad or already processed) are
  counted here, so the driver's totals are exact;
- ``model``/``dim``: the embedding model that embedded the item (set by
  ``embed``; null before it, or in a keyword-only store).

A stage unpacks a batch, calls the core step, and packs the result with ONE
tally that folds in the upstream tallies it received.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from mnemoray.backfill.busy import CPU, WALL
from mnemoray.backfill.placement import ACTORS, merge_actors
from mnemoray.backfill.steps import SessionItem
from mnemoray.sessions.session import Session

ITEM, STATS, MODEL, DIM = "item", "stats", "model", "dim"
SCHEMA = pa.schema(
    [(ITEM, pa.binary()), (STATS, pa.string()), (MODEL, pa.string()), (DIM, pa.int32())]
)
COUNTS = ("read", "skipped", "ledger_hits", "quarantined")


def merge_stats(stats: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum counts and per-stage wall and CPU seconds; keep the last summarizer name seen;
    fold the actors' placement (:mod:`mnemoray.backfill.placement`)."""
    stats = list(stats)
    out: dict[str, Any] = {k: 0 for k in COUNTS}
    busy: dict[str, dict[str, float]] = {WALL: {}, CPU: {}}
    for s in stats:
        for k in COUNTS:
            out[k] += int(s.get(k, 0))
        for key, by_stage in busy.items():
            for stage, secs in (s.get(key) or {}).items():
                by_stage[stage] = by_stage.get(stage, 0.0) + float(secs)
        if s.get("summarizer"):
            out["summarizer"] = s["summarizer"]
    out.update(busy)
    actors = merge_actors(s.get(ACTORS) for s in stats)
    if actors:
        out[ACTORS] = actors
    return out


def pack(
    items: Sequence[SessionItem],
    stats: Iterable[Mapping[str, Any]] = (),
    model: str | None = None,
    dim: int | None = None,
) -> pa.Table:
    """Items (pickled), the folded ``stats`` on the last row.

    The tally rides on the last item row, so it takes no row of its own (batch
    sizes count rows); a batch left without items is one row with no item.
    """
    blobs: list[bytes | None] = [pickle.dumps(i, protocol=pickle.HIGHEST_PROTOCOL) for i in items]
    n = max(len(blobs), 1)
    tallies: list[str | None] = [None] * n
    tallies[-1] = json.dumps(merge_stats(stats))
    return pa.table(
        {
            ITEM: blobs or [None],
            STATS: tallies,
            MODEL: [model if blobs else None] * n,
            DIM: [dim if blobs else None] * n,
        },
        schema=SCHEMA,
    )


def unpack(
    batch: pa.Table,
) -> tuple[list[SessionItem], list[dict[str, Any]], tuple[str, int] | None]:
    """(items, stats rows, (model, dim) of the embedded items or None)."""
    items: list[SessionItem] = []
    stats: list[dict[str, Any]] = []
    model: tuple[str, int] | None = None
    cols = batch.column_names
    models = batch.column(MODEL).to_pylist() if MODEL in cols else [None] * batch.num_rows
    dims = batch.column(DIM).to_pylist() if DIM in cols else [None] * batch.num_rows
    for blob, tally, m, d in zip(
        batch.column(ITEM).to_pylist(), batch.column(STATS).to_pylist(), models, dims, strict=True
    ):
        if blob is not None:
            items.append(pickle.loads(blob))
            if m is not None:
                model = (m, int(d or 0))
        if tally is not None:
            stats.append(json.loads(tally))
    return items, stats, model


def lighten(item: SessionItem) -> SessionItem:
    """What later stages need of a distilled item: no raw row, no events."""
    s = item.session
    return replace(item, raw=None, session=Session(s.app_name, s.user_id, s.session_id))
