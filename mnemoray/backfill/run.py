"""The backfill driver: one loop for every engine.

An engine only produces :class:`~mnemoray.backfill.commit.Chunk`\\ s (in this
process, or prepared by Ray Data workers); this driver commits them in order
(``commit_chunk``), keeps the run record (``STORE/runs/<run id>.json``) and the
progress line, and returns the one :class:`BackfillReport`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol, TextIO

from mnemoray.backfill import commit
from mnemoray.backfill.archive import estimate_rows
from mnemoray.backfill.busy import Busy
from mnemoray.backfill.commit import Chunk
from mnemoray.backfill.config import BackfillConfig
from mnemoray.backfill.placement import actor_rows
from mnemoray.backfill.report import BackfillReport, Tally
from mnemoray.memory.store.protocol import MemoryBackend, open_backend
from mnemoray.memory.store.runs import Progress, RunRecorder


class Engine(Protocol):
    """How batches are produced; everything else is the driver's."""

    name: str  # recorded in the run report

    def check(self, config: BackfillConfig) -> None:
        """Raise ``InvalidInput`` for anything in ``config`` this engine cannot honour."""

    def open(self, config: BackfillConfig, store: MemoryBackend) -> Iterator[Chunk]:
        """Check what can fail before any work (archive, models), then return the lazy
        chunks in archive order; closing the iterator releases the engine's resources."""


def backfill(
    config: BackfillConfig,
    engine: Engine | None = None,
    *,
    stream: TextIO | None = None,
    tty: bool | None = None,
) -> BackfillReport:
    """Distill every session of ``config.archive`` into ``config.store``.

    ``engine``: ``InProcessEngine()`` (the default) or the Ray Data engine
    (``mnemoray.pipeline.backfill.RayDataEngine``). Idempotent: sessions whose raw row is
    in the ledger are skipped, so a re-run adds nothing and a killed run resumes
    where it stopped. Progress lines go to ``stream`` (stderr by default).
    """
    if engine is None:
        from mnemoray.backfill.inprocess import InProcessEngine

        engine = InProcessEngine()
    config.check()
    engine.check(config)
    # A path, parquet://DIR or lancedb://DIR; a shard-count mismatch fails here.
    store = open_backend(config.store, config.shards)
    chunks = engine.open(config, store)
    progress = Progress(
        estimate_rows(config.archive), stream=stream, tty=tty, interval_s=config.progress_interval_s
    )
    recorder = RunRecorder(
        store.root, engine=engine.name, config=config.public(), run_id=config.run_id
    )
    tally = Tally()
    recorder.update(tally.counts, force=True, **tally.timeline(0.0))
    try:
        for chunk in chunks:
            # This thread's clock: on Ray, Ray Data's executor thread runs in this process.
            busy = Busy(time.thread_time)
            # Looked up on the module, so a test can make the commit fail.
            result = commit.commit_chunk(
                store,
                chunk,
                run_id=recorder.run_id,
                summarizer=chunk.stats.get("summarizer") or tally.summarizer,
            )
            tally.add(chunk, result, busy, recorder.seconds)
            # Written at every commit: a killed run's record names all it committed.
            recorder.update(
                tally.counts,
                tally.stages,
                force=True,
                manifest_version=result.version,
                stage_cpu_seconds=tally.cpu_seconds(),
                resolved=tally.resolved,
                actors=actor_rows(tally.actors),
                **tally.timeline(recorder.seconds),
            )
            progress.update(tally.progress, tally.line())
    except KeyboardInterrupt:
        recorder.update(
            tally.counts,
            tally.stages,
            actors=actor_rows(tally.actors),
            **tally.timeline(recorder.seconds),
        )
        recorder.finish("interrupted")
        raise
    except BaseException as exc:
        recorder.update(
            tally.counts,
            tally.stages,
            actors=actor_rows(tally.actors),
            **tally.timeline(recorder.seconds),
        )
        recorder.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:  # the engine's cleanup (Ray shutdown, ...)
            close()
    progress.done = tally.counts["sessions_read"]  # the tallies that trailed the last chunk
    progress.close(tally.line())
    seconds = recorder.seconds
    recorder.update(
        tally.counts,
        tally.stages,
        stage_cpu_seconds=tally.cpu_seconds(),
        resolved=tally.resolved,
        actors=actor_rows(tally.actors),
        **tally.timeline(seconds),
    )
    path = recorder.finish("succeeded")
    return tally.report(
        run_id=recorder.run_id, engine=engine.name, seconds=seconds, report_path=str(path)
    )


__all__ = ["Engine", "backfill"]
