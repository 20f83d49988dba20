"""What the memory inspector (``/ui``) reads beyond the per-user API: who has memories or
sessions (``GET /v1/apps``) and how the store is doing (``GET /v1/store``). Blocking
functions over one replica's store and sessions; the routes decide who may see them."""

from __future__ import annotations

import time
from typing import Any

from mnemoray.errors import Unsupported
from mnemoray.memory.backend import MemoryBackend, require_parquet
from mnemoray.memory.doctor import diagnose
from mnemoray.memory.runs import read_run_reports
from mnemoray.memory.snapshot import StoreSnapshot
from mnemoray.memory.stats import store_stats
from mnemoray.session_store import SessionStore

#: How many run reports ``GET /v1/store`` shows, newest first.
LAST_RUNS = 10
_RUN_FIELDS = ("run_id", "kind", "status", "started_at", "finished_at", "seconds",
               "throughput", "stage_seconds", "counts")


def live_counts(snap: StoreSnapshot) -> dict[str, dict[str, int]]:
    """app -> user -> live memories, for every user with at least one."""
    now = time.time()
    out: dict[str, dict[str, int]] = {}
    for seg, _ in snap.all_spans():
        live = snap.live_rows(seg, now)
        if not len(live):
            continue
        for (app, user), (start, end) in seg.ranges.items():
            n = int(((live >= start) & (live < end)).sum())
            if n:
                users = out.setdefault(app, {})
                users[user] = users.get(user, 0) + n
    return out


def tenants(snap: StoreSnapshot, sessions: SessionStore) -> dict[str, dict[str, int]]:
    """app -> user -> live memories, for every user with memories or sessions (0: only
    sessions so far), apps and users sorted by name."""
    out = live_counts(snap)
    for app in sessions.list_apps():
        users = out.setdefault(app, {})
        for info in sessions.list_sessions(app):
            users.setdefault(info.user_id, 0)
    return {app: dict(sorted(users.items())) for app, users in sorted(out.items())}


def doctor_summary(store: MemoryBackend) -> dict[str, Any]:
    """``{"healthy", "problems", "checked"}``: what ``mnemoray doctor`` finds (files only;
    a LanceDB store keeps no files the doctor reads: ``checked`` false)."""
    try:
        parquet = require_parquet(store, "the doctor")
    except Unsupported as exc:
        return {"healthy": True, "problems": [], "checked": False, "note": str(exc)}
    report = diagnose(parquet.root)
    return {"healthy": report.healthy, "problems": list(report.problems), "checked": True}


def recent_runs(store: MemoryBackend, n: int = LAST_RUNS) -> list[dict[str, Any]]:
    """The last ``n`` batch run reports, newest first, their summary fields only."""
    runs = read_run_reports(store.root)[-n:]
    return [{k: r[k] for k in _RUN_FIELDS if k in r} for r in reversed(runs)]


def store_report(store: MemoryBackend) -> dict[str, Any]:
    """``GET /v1/store``: the store's figures, the doctor's findings, the last runs."""
    return {"stats": store_stats(store), "doctor": doctor_summary(store),
            "runs": recent_runs(store)}


__all__ = ["LAST_RUNS", "doctor_summary", "live_counts", "recent_runs", "store_report",
           "tenants"]
