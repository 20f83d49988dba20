"""The commit timeline of a backfill run: when each chunk was committed, vs the wall time.

A backfill that streams commits about evenly from its first seconds on; one that holds
its chunks back commits everything in its last seconds (a job killed at 90% then keeps
almost nothing). From a run's ``BackfillReport`` (``commit_timeline``: seconds since the
run started, sessions committed so far, manifest version of each commit; thinned to at
most 64 points, first and last kept) this module derives the figures the backfill
benchmark reports and prints them.
"""

from __future__ import annotations

from typing import Any


def timeline(report: Any) -> dict[str, Any]:
    """The commit timeline figures of one run (a ``BackfillReport``)."""
    wall = float(report.seconds)
    points = list(report.commit_timeline)
    first = report.first_commit_s
    last = points[-1]["seconds"] if points else None
    return {
        "wall_s": round(wall, 3),
        "commits": report.commits,
        "sessions_committed": report.sessions_committed,
        "first_commit_s": first,
        "first_commit_share_of_wall": round(first / wall, 3)
        if first is not None and wall
        else None,
        "last_commit_s": last,
        # Share of the commits made by 50% / 90% of the wall time.
        "commit_share_by_wall": dict(report.commit_share_by_wall),
        "points": points,
    }


def render(label: str, tl: dict[str, Any], most_rows: int = 24) -> str:
    """A few lines: the summary, then commit / seconds / % of wall / sessions / version."""
    wall = tl["wall_s"]
    if not tl["points"]:
        return f"{label}: no commit in {wall:.1f} s"
    shares = tl["commit_share_by_wall"]
    lines = [
        f"{label}: {tl['commits']} commits in {wall:.1f} s; first at "
        f"{tl['first_commit_s']:.1f} s ({tl['first_commit_share_of_wall']:.0%} of wall), "
        f"last at {tl['last_commit_s']:.1f} s; commits made by 50% of wall: "
        f"{shares.get('50%', 0):.0%}, by 90%: {shares.get('90%', 0):.0%}",
        f"  {'commit':>6} {'seconds':>8} {'% wall':>7} {'sessions':>9} {'version':>8}",
    ]
    points = tl["points"]
    step = max(1, -(-len(points) // most_rows))
    shown = points[::step] + ([points[-1]] if (len(points) - 1) % step else [])
    for p in shown:
        lines.append(
            f"  {p['commit']:>6} {p['seconds']:>8.1f} {p['seconds'] / wall:>7.0%} "
            f"{p['sessions']:>9} {p['version']:>8}"
        )
    return "\n".join(lines)


__all__ = ["render", "timeline"]
