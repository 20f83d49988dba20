"""What a backfill reports: one type for both engines, and the running tally behind it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mnemoray.backfill.commit import Chunk
from mnemoray.memory.store import WriteResult

COUNTS = ("sessions_read", "skipped", "quarantined", "memories_written", "sessions_committed",
          "commits", "segments_written")


@dataclass(frozen=True)
class BackfillReport:
    """The result of one backfill run; its run record is ``report_path`` in the store."""

    run_id: str
    engine: str  # "in_process" or "ray_data"
    sessions_read: int  # archive rows read, good or bad
    skipped: int  # sessions already in the ledger (or repeated in this run)
    quarantined: int  # rows sent to quarantine by this run
    memories_written: int  # memory rows committed by this run
    sessions_committed: int  # ledger entries added by this run
    commits: int  # manifest commits (one per chunk)
    segments_written: int
    seconds: float
    sessions_per_s: float
    stage_seconds: dict[str, float] = field(default_factory=dict)  # busy time, all workers
    report_path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """The human-readable lines the CLI and the jobs print."""
        return (f"sessions read: {self.sessions_read}\nskipped: {self.skipped}\n"
                f"quarantined: {self.quarantined}\nmemories written: {self.memories_written}\n"
                f"seconds: {self.seconds:.2f}\nsessions/s: {self.sessions_per_s:.1f}\n"
                f"run report: {self.report_path}")


class Tally:
    """Running totals of a backfill, chunk by chunk."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.stages: dict[str, float] = {}
        self.summarizer: str | None = None
        self.done = 0  # sessions accounted for (what progress shows)

    def add(self, chunk: Chunk, result: WriteResult, commit_s: float) -> None:
        stats = chunk.stats
        self.summarizer = stats.get("summarizer") or self.summarizer
        for stage, secs in {**stats.get("seconds", {}), "commit": commit_s}.items():
            self.stages[stage] = self.stages.get(stage, 0.0) + secs
        c = self.counts
        c["sessions_read"] += stats.get("read", 0)
        c["skipped"] += stats.get("skipped", 0)
        c["quarantined"] += stats.get("quarantined", 0)
        c["memories_written"] += result.written
        c["sessions_committed"] += result.ledger_added
        c["commits"] += 1
        c["segments_written"] += chunk.prepared_segments
        # The chunk's sessions (exact) plus the rows that left the flow (tallied by their
        # stage, which on Ray may trail its items).
        self.done += len(chunk.hashes)

    @property
    def progress(self) -> int:
        return self.done + self.counts["skipped"] + self.counts["quarantined"]

    def line(self) -> str:
        c = self.counts
        return (f"memories {c['memories_written']}  quarantined {c['quarantined']}  "
                f"skipped {c['skipped']}  commits {c['commits']}")

    def report(self, *, run_id: str, engine: str, seconds: float,
               report_path: str) -> BackfillReport:
        c = self.counts
        return BackfillReport(
            run_id=run_id, engine=engine, sessions_read=c["sessions_read"], skipped=c["skipped"],
            quarantined=c["quarantined"], memories_written=c["memories_written"],
            sessions_committed=c["sessions_committed"], commits=c["commits"],
            segments_written=c["segments_written"], seconds=round(seconds, 3),
            sessions_per_s=round(c["sessions_read"] / seconds, 3) if seconds else 0.0,
            stage_seconds={k: round(v, 3) for k, v in self.stages.items()},
            report_path=report_path)


__all__ = ["COUNTS", "BackfillReport", "Tally"]
