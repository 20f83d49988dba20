"""Backfill commits stream, and the report says when: commit timeline, ledger hits (no Ray).

The Ray Data engine's streaming is tested with a real flow in
``test_pipeline_backfill.py`` (``..._while_the_archive_is_still_being_distilled``)
and by killing real jobs in ``test_backfill_kills.py``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mnemoray.backfill import BackfillConfig, backfill, commit
from mnemoray.backfill.archive import write_archive
from mnemoray.backfill.report import (
    TIMELINE_POINTS,
    CommitPoint,
    count_ledger_hits,
    share_by_wall,
    thin,
)
from mnemoray.backfill.steps import SessionItem
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports
from mnemoray.sessions.events import Event
from mnemoray.summarizers import ExtractiveSummarizer, Summary
from tests.support.archive_gen import make_archive, make_session

SESSIONS, EVERY = 12, 3


class Counting(ExtractiveSummarizer):
    """The extractive summarizer, noting which sessions it has seen (ids ``sNNNN-...``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        for events in batches:
            self.seen.update(e.id.split("-")[0] for e in events)
        return super().summarize_many(batches)


def record(store: Path) -> dict[str, Any]:
    (only,) = read_run_reports(store)
    return only


def test_in_process_commits_each_chunk_before_reading_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each commit happens before the next chunk is distilled, and the run record on disk
    names every earlier commit (a run killed now keeps it, and its record says so)."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, SESSIONS, files=1, bad=False, parquet=False)
    summarizer = Counting()
    seen_at_commit: list[int] = []
    recorded_at_commit: list[int] = []
    real = commit.commit_chunk

    def watched(store_: MemoryStore, chunk: commit.Chunk, **kw: Any) -> Any:
        seen_at_commit.append(len(summarizer.seen))
        recorded_at_commit.append(len(record(store)["commit_timeline"]))
        return real(store_, chunk, **kw)

    monkeypatch.setattr(commit, "commit_chunk", watched)
    report = backfill(
        BackfillConfig(archive, store, embedder=None, summarizer=summarizer, commit_every=EVERY),
        stream=io.StringIO(),
        tty=False,
    )
    n = SESSIONS // EVERY
    assert report.commits == n
    assert seen_at_commit == [EVERY * (k + 1) for k in range(n)]
    assert recorded_at_commit == list(range(n))


def test_report_and_run_record_carry_the_commit_timeline(tmp_path: Path) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, SESSIONS, files=2, bad=False, parquet=False)
    stream = io.StringIO()
    report = backfill(
        BackfillConfig(archive, store, embedder=None, commit_every=EVERY, progress_interval_s=0.0),
        stream=stream,
        tty=False,
    )
    timeline = report.commit_timeline
    assert len(timeline) == report.commits == SESSIONS // EVERY
    assert [p["commit"] for p in timeline] == list(range(1, report.commits + 1))
    assert [p["sessions"] for p in timeline] == [EVERY * k for k in range(1, len(timeline) + 1)]
    versions = [p["version"] for p in timeline]
    assert versions == sorted(set(versions))
    assert versions[-1] == MemoryStore(store).manifest().version
    seconds = [p["seconds"] for p in timeline]
    assert seconds == sorted(seconds) and 0 <= seconds[-1] <= report.seconds
    assert report.first_commit_s == seconds[0]
    assert set(report.commit_share_by_wall) == {"50%", "90%"}
    assert report.commit_share_by_wall["90%"] <= 1.0

    saved = record(store)
    assert saved["commit_timeline"] == timeline and saved["first_commit_s"] == seconds[0]
    assert saved["counts"]["ledger_hits"] == 0 and saved["manifest_version"] == versions[-1]
    assert json.loads(json.dumps(report.to_dict()))["commit_timeline"] == timeline
    # The progress line names the commits as they happen.
    lines = stream.getvalue().splitlines()
    assert any(
        f"commits 1 ({EVERY} sessions, manifest v{versions[0]} at" in line for line in lines
    ), lines
    assert f"commits {report.commits} ({SESSIONS} sessions" in lines[-1]
    assert (
        "ledger hits: 0\n" in report.summary()
        and f"commits: {report.commits}\n" in report.summary()
    )


def test_timeline_is_thinned_for_long_runs() -> None:
    points = [CommitPoint(i + 1, float(i), 10 * (i + 1), i + 2) for i in range(1000)]
    kept = thin(points)
    assert len(kept) == TIMELINE_POINTS
    assert kept[0] == points[0] and kept[-1] == points[-1]
    gaps = {b.commit - a.commit for a, b in zip(kept, kept[1:], strict=False)}
    assert gaps <= {15, 16, 17}  # evenly spread
    assert thin(points[:5]) == points[:5]
    # 1000 commits at t = 0..999 s of a 1000 s run: half by half time, 90% by 90%.
    assert share_by_wall(points, 1000.0) == {"50%": 0.501, "90%": 0.901}
    # All at the end: nothing by half time.
    late = [CommitPoint(i + 1, 99.0 + i / 100, i, i) for i in range(50)]
    assert share_by_wall(late, 100.0) == {"50%": 0.0, "90%": 0.0}
    assert share_by_wall([], 10.0) == {}


def test_ledger_hits_are_sessions_the_ledger_held_not_repeats(tmp_path: Path) -> None:
    def item(i: int) -> SessionItem:
        return SessionItem(f"x:{i}", f"h{i}", make_session(i))

    items = [item(0), item(1), item(1), item(2), item(3)]  # h1 twice
    assert count_ledger_hits(items, [items[1], items[3]]) == 2  # h0, h3 were in the ledger
    assert count_ledger_hits(items, [items[0], items[1], items[3], items[4]]) == 0

    archive, store = tmp_path / "archive", tmp_path / "store"
    sessions = [make_session(i) for i in range(8)]
    write_archive(sessions[:5], archive / "a.jsonl")
    first = backfill(BackfillConfig(archive, store, embedder=None, commit_every=4))
    assert (first.ledger_hits, first.sessions_committed) == (0, 5)
    # More sessions arrive, one of them twice in one batch (rows 6-9: a4 b5 b6 b6):
    # 5 ledger hits, 1 repeat, 3 new sessions.
    write_archive([sessions[5], sessions[6], sessions[6], sessions[7]], archive / "b.jsonl")
    again = backfill(
        BackfillConfig(archive, store, embedder=None, commit_every=4),
        stream=io.StringIO(),
        tty=False,
    )
    assert (again.sessions_read, again.skipped, again.ledger_hits) == (9, 6, 5)
    assert again.sessions_committed == 3
    assert record_of(store, again.run_id)["counts"]["ledger_hits"] == 5


def record_of(store: Path, run_id: str) -> dict[str, Any]:
    return next(r for r in read_run_reports(store) if r["run_id"] == run_id)
