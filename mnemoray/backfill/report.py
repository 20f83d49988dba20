"""What a backfill reports: one type for both engines, and the running tally behind it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mnemoray.backfill.busy import CPU, WALL, Busy
from mnemoray.backfill.commit import Chunk
from mnemoray.backfill.placement import ACTORS, actor_rows, merge_actors
from mnemoray.memory.store.writes import WriteResult

COUNTS = (
    "sessions_read",
    "skipped",
    "ledger_hits",
    "quarantined",
    "memories_written",
    "sessions_committed",
    "commits",
    "segments_written",
)
# Most commit points a report keeps: a long run's timeline is thinned evenly, its first
# and last commit always kept, so the run record stays small.
TIMELINE_POINTS = 64
WALL_SHARES = (0.5, 0.9)  # commit_share_by_wall: commits made by these shares of the run


@dataclass(frozen=True)
class CommitPoint:
    """One manifest commit of a run."""

    commit: int  # 1 for the run's first commit
    seconds: float  # since the run started
    sessions: int  # sessions committed by this run so far (ledger entries added)
    version: int  # the manifest version the commit published

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "seconds": round(self.seconds, 3),
            "sessions": self.sessions,
            "version": self.version,
        }


def thin(points: Sequence[CommitPoint], most: int = TIMELINE_POINTS) -> list[CommitPoint]:
    """At most ``most`` (>= 2) points spread evenly over ``points``, first and last kept."""
    n = len(points)
    if n <= most:
        return list(points)
    step = (n - 1) / (most - 1)
    return [points[i] for i in sorted({round(k * step) for k in range(most)})]


def share_by_wall(points: Sequence[CommitPoint], seconds: float) -> dict[str, float]:
    """For each of ``WALL_SHARES``: the share of the commits made by then (a streaming
    run commits about evenly; one that holds everything back commits only at the end)."""
    if not points or seconds <= 0:
        return {}
    return {
        f"{s:.0%}": round(sum(p.seconds <= s * seconds for p in points) / len(points), 3)
        for s in WALL_SHARES
    }


def count_ledger_hits(items: Sequence[Any], todo: Sequence[Any]) -> int:
    """Of ``items`` (``SessionItem``\\ s), those ``skip_processed`` dropped because the ledger
    holds them: every hash it kept is in ``todo`` (first copy), so a dropped item whose
    hash ``todo`` lacks was in the ledger; one whose hash ``todo`` has was a repeat."""
    kept = {item.raw_hash for item in todo}
    return sum(1 for item in items if item.raw_hash not in kept)


@dataclass(frozen=True)
class BackfillReport:
    """The result of one backfill run; its run record is ``report_path`` in the store."""

    run_id: str
    engine: str  # "in_process" or "ray_data"
    sessions_read: int  # archive rows read, good or bad
    skipped: int  # sessions already in the ledger, or repeated in this run
    quarantined: int  # rows sent to quarantine by this run
    memories_written: int  # memory rows committed by this run
    sessions_committed: int  # ledger entries added by this run
    commits: int  # manifest commits (one per chunk that added memories or ledger entries)
    segments_written: int
    seconds: float
    sessions_per_s: float
    stage_seconds: dict[str, float] = field(default_factory=dict)  # busy time, all workers
    # The CPU seconds of those stages' processes (``mnemoray.backfill.busy``), all workers.
    stage_cpu_seconds: dict[str, float] = field(default_factory=dict)
    report_path: str = ""
    ledger_hits: int = 0  # of ``skipped``: sessions the ledger already held (a resumed run)
    first_commit_s: float | None = None  # seconds from the start to the first commit
    # Commit points (``CommitPoint.to_dict``), thinned to TIMELINE_POINTS.
    commit_timeline: list[dict[str, Any]] = field(default_factory=list)
    commit_share_by_wall: dict[str, float] = field(default_factory=dict)
    # Settings the config left open, as the engine chose them (Ray Data: ``workers``).
    resolved: dict[str, Any] = field(default_factory=dict)
    # Ray Data: each distill and embed actor, the node it ran on and the sessions it
    # handled (``mnemoray.backfill.placement``); empty in process.
    actors: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """The human-readable lines the CLI and the jobs print."""
        return (
            f"sessions read: {self.sessions_read}\nskipped: {self.skipped}\n"
            f"quarantined: {self.quarantined}\nmemories written: {self.memories_written}\n"
            f"ledger hits: {self.ledger_hits}\ncommits: {self.commits}\n"
            f"seconds: {self.seconds:.2f}\nsessions/s: {self.sessions_per_s:.1f}\n"
            f"run report: {self.report_path}"
        )


class Tally:
    """Running totals of a backfill, chunk by chunk, and when each chunk was committed."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.stages: dict[str, float] = {}
        self.cpu_stages: dict[str, float] = {}
        self.resolved: dict[str, Any] = {}
        self.summarizer: str | None = None
        self.done = 0  # sessions accounted for (what progress shows)
        self.points: list[CommitPoint] = []
        self.actors: dict[str, dict[str, Any]] = {}

    def add(self, chunk: Chunk, result: WriteResult, commit: Busy, at_s: float) -> None:
        """Count ``chunk``, committed as ``result`` since ``commit`` started, ``at_s``
        into the run."""
        stats = chunk.stats
        self.summarizer = stats.get("summarizer") or self.summarizer
        self.resolved.update(stats.get("resolved") or {})
        self.actors = merge_actors([self.actors, stats.get(ACTORS)])
        commit_s, commit_cpu = commit.elapsed()
        for totals, key, secs_commit in (
            (self.stages, WALL, commit_s),
            (self.cpu_stages, CPU, commit_cpu),
        ):
            for stage, secs in {**stats.get(key, {}), "commit": secs_commit}.items():
                totals[stage] = totals.get(stage, 0.0) + secs
        c = self.counts
        c["sessions_read"] += stats.get("read", 0)
        c["skipped"] += stats.get("skipped", 0)
        c["ledger_hits"] += stats.get("ledger_hits", 0)
        c["quarantined"] += stats.get("quarantined", 0)
        c["memories_written"] += result.written
        c["sessions_committed"] += result.ledger_added
        c["segments_written"] += chunk.prepared_segments
        if result.written or result.ledger_added or result.segments:
            # A chunk of sessions all in the ledger already publishes nothing: no commit.
            c["commits"] += 1
            self.points.append(
                CommitPoint(c["commits"], at_s, c["sessions_committed"], result.version)
            )
        # The chunk's sessions (exact) plus the rows that left the flow (tallied by their
        # stage, which on Ray may trail its items).
        self.done += len(chunk.hashes)

    @property
    def progress(self) -> int:
        return self.done + self.counts["skipped"] + self.counts["quarantined"]

    def timeline(self, seconds: float) -> dict[str, Any]:
        """The commit fields of the report and run record, ``seconds`` into the run (small
        for any number of commits)."""
        first = self.points[0].seconds if self.points else None
        return {
            "first_commit_s": None if first is None else round(first, 3),
            "commit_timeline": [p.to_dict() for p in thin(self.points)],
            "commit_share_by_wall": share_by_wall(self.points, seconds),
        }

    def cpu_seconds(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.cpu_stages.items()}

    def line(self) -> str:
        c = self.counts
        last = self.points[-1] if self.points else None
        committed = (
            f"commits {c['commits']} ({c['sessions_committed']} sessions, "
            f"manifest v{last.version} at {last.seconds:.0f}s)"
            if last
            else "commits 0"
        )
        return (
            f"memories {c['memories_written']}  quarantined {c['quarantined']}  "
            f"skipped {c['skipped']} (ledger {c['ledger_hits']})  {committed}"
        )

    def report(
        self, *, run_id: str, engine: str, seconds: float, report_path: str
    ) -> BackfillReport:
        c = self.counts
        return BackfillReport(
            run_id=run_id,
            engine=engine,
            sessions_read=c["sessions_read"],
            skipped=c["skipped"],
            quarantined=c["quarantined"],
            memories_written=c["memories_written"],
            sessions_committed=c["sessions_committed"],
            commits=c["commits"],
            segments_written=c["segments_written"],
            seconds=round(seconds, 3),
            sessions_per_s=round(c["sessions_read"] / seconds, 3) if seconds else 0.0,
            stage_seconds={k: round(v, 3) for k, v in self.stages.items()},
            stage_cpu_seconds=self.cpu_seconds(),
            resolved=dict(self.resolved),
            report_path=report_path,
            ledger_hits=c["ledger_hits"],
            actors=actor_rows(self.actors),
            **self.timeline(seconds),
        )


__all__ = [
    "COUNTS",
    "TIMELINE_POINTS",
    "BackfillReport",
    "CommitPoint",
    "Tally",
    "count_ledger_hits",
    "share_by_wall",
    "thin",
]
