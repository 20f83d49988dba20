"""Backfill: distill an archive of sessions into a memory store.

One core for both engines: ``BackfillConfig`` (``config``), the steps
(``steps``), the commit step (``commit``), the driver with its run record and
the one ``BackfillReport`` (``run``, ``report``). Engines differ only in how
batches are produced: ``InProcessEngine`` here, the Ray Data engine in
``mnemoray.pipeline.backfill``.

    from mnemoray.backfill import BackfillConfig, backfill
    report = backfill(BackfillConfig(archive="archive/", store="store/"))
"""

from mnemoray.backfill.config import BackfillConfig, RayOptions
from mnemoray.backfill.inprocess import InProcessEngine
from mnemoray.backfill.report import BackfillReport
from mnemoray.backfill.run import Engine, backfill

__all__ = [
    "BackfillConfig",
    "BackfillReport",
    "Engine",
    "InProcessEngine",
    "RayOptions",
    "backfill",
]
