"""What a memory store holds, in figures an operator reads (``mnemoray stats``)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from mnemoray.memory.backend import MemoryBackend
from mnemoray.memory.runs import read_run_reports


def store_stats(store: MemoryBackend) -> dict[str, Any]:
    """Live memories (total, per kind, per app), users and apps with live memories,
    shards, segments, rows on disk (live + forgotten/expired until a compaction),
    bytes on disk per top-level folder, the embedding model and the last batch run.
    A LanceDB store has no segment files (``segments`` 0); its rows are read in one pass."""
    snap = store.load()
    snap.check_healthy()  # figures for the whole store, never a partial count
    now = time.time()
    kinds: Counter[str] = Counter()
    apps: Counter[str] = Counter()
    users: set[tuple[str, str]] = set()
    stored = 0
    for seg, _ in snap.all_spans():
        stored += seg.rows
        live = snap.live_rows(seg, now)
        if not len(live):
            continue
        kind = seg.table["kind"].to_numpy(zero_copy_only=False)[live]
        for name, n in zip(*np.unique(kind, return_counts=True), strict=True):
            kinds[str(name)] += int(n)
        for (app, user), (start, end) in seg.ranges.items():
            n = int(np.count_nonzero((live >= start) & (live < end)))
            if n:
                users.add((app, user))
                apps[app] += n
    m = snap.manifest
    runs = read_run_reports(store.root)
    last = runs[-1] if runs else None
    return {
        "backend": store.backend,
        "memories": sum(kinds.values()),
        "kinds": dict(sorted(kinds.items())),
        "apps": dict(sorted(apps.items())),
        "users": len(users),
        "shards": m.shards, "segments": sum(len(s) for s in m.segments),
        "rows_stored": stored, "manifest_version": m.version,
        "embedding_model": m.embedding_model, "dim": m.dim, "summarizer": m.summarizer,
        "bytes": _bytes(store.root),
        "last_run": None if last is None else {
            k: last.get(k) for k in ("run_id", "kind", "status", "started_at", "finished_at")},
    }


def _bytes(root: Path) -> dict[str, int]:
    """Bytes on disk: ``total`` and per top-level entry (memories, index, ledger, ...)."""
    out: dict[str, int] = {}
    for entry in sorted(root.iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        out[entry.name] = sum(p.stat().st_size for p in files)
    out["total"] = sum(out.values())
    return out
