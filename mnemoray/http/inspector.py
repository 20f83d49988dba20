"""What the memory inspector (``/ui``) reads beyond the per-user API: who has memories or
sessions (``GET /v1/apps``) and how the store is doing (``GET /v1/store``). Blocking
functions over one replica's store and sessions; the routes decide who may see them."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from mnemoray.errors import Unsupported
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.ops.doctor import diagnose
from mnemoray.memory.store.ops.stats import live_per_tenant, readable_spans, store_stats
from mnemoray.memory.store.protocol import MemoryBackend, require_parquet
from mnemoray.memory.store.runs import read_run_reports
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.schemas.store import MAX_USERS
from mnemoray.sessions.store import SessionStore

#: How many run reports ``GET /v1/store`` shows, newest first.
LAST_RUNS = 10
_RUN_FIELDS = (
    "run_id",
    "kind",
    "status",
    "started_at",
    "finished_at",
    "seconds",
    "throughput",
    "stage_seconds",
    "counts",
)


def live_counts(
    snap: StoreSnapshot,
    apps: Collection[str] | None = None,
) -> dict[str, dict[str, int]]:
    """app -> user -> live memories, for every user with at least one (of ``apps`` only,
    when given), in the shards that could be read (``snap.damaged`` are skipped)."""
    now = time.time()
    out: dict[str, dict[str, int]] = {}
    for seg, _ in readable_spans(snap):
        ranges = (
            seg.ranges if apps is None else {t: r for t, r in seg.ranges.items() if t[0] in apps}
        )
        if not ranges:
            continue
        for (app, user), n in live_per_tenant(ranges, snap.live_rows(seg, now)).items():
            users = out.setdefault(app, {})
            users[user] = users.get(user, 0) + n
    return out


def tenants(
    snap: StoreSnapshot,
    sessions: SessionStore,
    apps: Collection[str] | None = None,
    max_users: int = MAX_USERS,
) -> dict[str, Any]:
    """``GET /v1/apps`` before the route hides what the caller may not see:
    ``{"apps": [{"app_name", "memories", "users": [{"user_id", "memories"}],
    "users_truncated"}], "skipped_shards": [...]}``. An app or user is listed when it has
    memories or sessions (0 memories: only sessions so far); ``apps``: only those (the
    caller's; None: every app). Users by name, the first ``max_users`` of each app
    (``users_truncated`` says there are more; ``memories`` counts them all). A damaged
    shard is skipped (its number in ``skipped_shards``), with the users it holds."""
    damaged = set(snap.damaged)
    counts = live_counts(snap, apps)
    # The first max_users + 1 names of each app's session users suffice: any of the first
    # max_users names of the union that has sessions is among them.
    with_sessions = sessions.app_users(apps, max_users + 1)
    out = []
    for app in sorted(set(counts) | {a for a, us in with_sessions.items() if us}):
        users = counts.get(app, {})
        idle = [
            u
            for u in with_sessions.get(app, ())
            if u not in users and (not damaged or shard_of(app, u, snap.shards) not in damaged)
        ]
        names = sorted([*users, *idle])
        if not names:
            continue
        out.append(
            {
                "app_name": app,
                "memories": sum(users.values()),
                "users": [{"user_id": u, "memories": users.get(u, 0)} for u in names[:max_users]],
                "users_truncated": len(names) > max_users,
            }
        )
    return {"apps": out, "skipped_shards": sorted(damaged)}


def doctor_summary(store: MemoryBackend) -> dict[str, Any]:
    """``{"healthy", "problems", "checked"}``: what ``mnemoray doctor`` finds (files only;
    a LanceDB store keeps no files the doctor reads: ``checked`` false)."""
    try:
        parquet = require_parquet(store, "the doctor")
    except Unsupported as exc:
        return {"healthy": True, "problems": [], "checked": False, "note": str(exc)}
    report = diagnose(parquet.root)
    return {"healthy": report.healthy, "problems": list(report.problems), "checked": True}


def recent_runs(runs: list[dict[str, Any]], n: int = LAST_RUNS) -> list[dict[str, Any]]:
    """The last ``n`` of ``runs`` (a store's run reports, oldest first), newest first,
    their summary fields only."""
    return [{k: r[k] for k in _RUN_FIELDS if k in r} for r in reversed(runs[-n:])]


def store_report(store: MemoryBackend) -> dict[str, Any]:
    """``GET /v1/store``: the store's figures, the doctor's findings, the last runs. With
    a damaged shard the figures are those of the other shards (``stats.partial``,
    ``stats.damaged_shards``) and the doctor says what is wrong: the health view is where
    an operator looks when a shard breaks."""
    runs = read_run_reports(store.root)  # read once: the stats name the last one too
    return {
        "stats": store_stats(store, skip_damaged=True, runs=runs),
        "doctor": doctor_summary(store),
        "runs": recent_runs(runs),
    }


__all__ = ["LAST_RUNS", "doctor_summary", "live_counts", "recent_runs", "store_report", "tenants"]
