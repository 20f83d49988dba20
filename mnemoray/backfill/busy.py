"""How long a backfill stage was busy: wall seconds and the CPU seconds of its process.

Every stage reports both in its stats (``seconds`` and ``cpu_seconds``, per stage name)
and the run report sums them over workers (``stage_seconds``, ``stage_cpu_seconds``).
Wall time alone misleads on a shared or oversubscribed machine: a stage waiting for a
core looks as busy as one using it. The CPU seconds are those of the whole process
(``time.process_time``), so an encoder's own threads count toward its stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WALL, CPU = "seconds", "cpu_seconds"


@dataclass
class Busy:
    """A started clock: ``Busy()`` when the stage begins, ``tally(stage)`` when it ends.
    ``cpu_clock``: the process's (default) or ``time.thread_time`` for work that runs on
    the calling thread alone while other threads of the process do other work."""

    cpu_clock: Callable[[], float] = time.process_time
    wall0: float = field(default_factory=time.perf_counter)
    cpu0: float = field(init=False)

    def __post_init__(self) -> None:
        self.cpu0 = self.cpu_clock()

    def elapsed(self) -> tuple[float, float]:
        """(wall, CPU) seconds since the start."""
        return time.perf_counter() - self.wall0, self.cpu_clock() - self.cpu0

    def tally(self, stage: str) -> dict[str, Any]:
        """The stats entry of ``stage``: its wall and CPU seconds since the start."""
        wall, cpu = self.elapsed()
        return {WALL: {stage: wall}, CPU: {stage: cpu}}


def add_busy(stats: dict[str, Any], stage: str, wall: float, cpu: float) -> None:
    """Add a stage's seconds to ``stats`` in place (a stage that ran in several steps)."""
    for key, secs in ((WALL, wall), (CPU, cpu)):
        by_stage = stats.setdefault(key, {})
        by_stage[stage] = by_stage.get(stage, 0.0) + secs


__all__ = ["CPU", "WALL", "Busy", "add_busy"]
