"""What a memory store holds, in figures an operator reads (``mnemoray stats``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mnemoray.memory.store.protocol import MemoryBackend
from mnemoray.memory.store.runs import read_run_reports
from mnemoray.memory.store.segment import LoadedSegment, Range
from mnemoray.memory.store.snapshot import StoreSnapshot

Tenant = tuple[str, str]


def live_per_tenant(ranges: Mapping[Tenant, Range], live: np.ndarray) -> dict[Tenant, int]:
    """(app, user) -> how many of ``live`` (a segment's live row numbers, ascending) fall in
    the tenant's row range, for tenants with at least one: two binary searches per tenant,
    never a pass over every live row per tenant (a segment holds thousands of users)."""
    if not ranges or not len(live):
        return {}
    tenants = list(ranges)
    bounds = np.asarray([ranges[t] for t in tenants], dtype=np.int64)  # (n, 2): start, end
    counts = np.searchsorted(live, bounds[:, 1], side="left") - np.searchsorted(
        live, bounds[:, 0], side="left"
    )
    return {tenants[i]: int(counts[i]) for i in np.flatnonzero(counts)}


def readable_spans(snap: StoreSnapshot) -> list[tuple[LoadedSegment, Range]]:
    """Every segment's rows, but those of damaged shards (``snap.damaged``: shard -> why):
    what a store-wide figure can still count while a shard is being repaired."""
    damaged = snap.damaged
    if not damaged:
        return snap.all_spans()
    return [
        (seg, (0, seg.rows))
        for shard, segs in enumerate(snap.segments)
        if shard not in damaged
        for seg in segs
    ]


def store_stats(
    store: MemoryBackend, *, skip_damaged: bool = False, runs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Live memories (total, per kind, per app), users and apps with live memories,
    shards, segments, rows on disk (live + forgotten/expired until a compaction),
    bytes on disk per top-level folder, the embedding model and the last batch run.
    A LanceDB store has no segment files (``segments`` 0); its rows are read in one pass.

    A damaged shard (its files unreadable) raises StoreCorrupt: figures for the whole
    store, never a partial count. ``skip_damaged``: count the other shards instead, and
    name the damaged ones under ``damaged_shards`` (``partial`` true), for a health view
    that must answer while a shard is broken. ``runs``: the store's run reports, where
    the caller has read them already (default: read here)."""
    # Both backends' views are StoreSnapshots (LanceView subclasses it).
    snap: StoreSnapshot = store.load()
    damaged = sorted(snap.damaged)
    if not skip_damaged:
        snap.check_healthy()  # figures for the whole store, never a partial count
    now = time.time()
    kinds: Counter[str] = Counter()
    apps: Counter[str] = Counter()
    users: set[tuple[str, str]] = set()
    stored = 0
    for seg, _ in readable_spans(snap):
        stored += seg.rows
        live = snap.live_rows(seg, now)
        if not len(live):
            continue
        kind = seg.table["kind"].to_numpy(zero_copy_only=False)[live]
        for name, n in zip(*np.unique(kind, return_counts=True), strict=True):
            kinds[str(name)] += int(n)
        for (app, user), n in live_per_tenant(seg.ranges, live).items():
            users.add((app, user))
            apps[app] += n
    m = snap.manifest
    runs = read_run_reports(store.root) if runs is None else runs
    last = runs[-1] if runs else None
    return {
        "backend": store.backend,
        "memories": sum(kinds.values()),
        "kinds": dict(sorted(kinds.items())),
        "apps": dict(sorted(apps.items())),
        "users": len(users),
        "shards": m.shards,
        "segments": sum(len(s) for s in m.segments),
        "rows_stored": stored,
        "manifest_version": m.version,
        "embedding_model": m.embedding_model,
        "dim": m.dim,
        "summarizer": m.summarizer,
        "bytes": _bytes(store.root),
        "last_run": None
        if last is None
        else {k: last.get(k) for k in ("run_id", "kind", "status", "started_at", "finished_at")},
        **({"partial": bool(damaged), "damaged_shards": damaged} if skip_damaged else {}),
    }


def _bytes(root: Path) -> dict[str, int]:
    """Bytes on disk: ``total`` and per top-level entry (memories, index, ledger, ...)."""
    out: dict[str, int] = {}
    for entry in sorted(root.iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        out[entry.name] = sum(p.stat().st_size for p in files)
    out["total"] = sum(out.values())
    return out
