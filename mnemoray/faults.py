"""Fault injection for crash-safety tests: a real process exit at a named point.

``MNEMORAY_CRASH_AFTER=prepare:2`` makes the second pass through
``crash_point("prepare")`` end the process at once with ``os._exit`` (no
cleanup, no flush of anything but stderr), exactly like a SIGKILL at that
spot. Unset (the normal case) it costs one dictionary lookup.

Points: ``prepare`` (a backfill chunk's segment files are written, its commit
has not happened), ``commit`` (right after a backfill commit) and
``compact-prepare`` (merged segments written, manifest not yet replaced),
``lance-memories`` (a LanceDB store's commit added its memory rows, not yet its ledger
rows or head), ``graph-commit`` (a Parquet commit wrote its entity graph parts, not yet
its manifest).
"""

from __future__ import annotations

import os
import sys
from collections import Counter

CRASH_ENV = "MNEMORAY_CRASH_AFTER"
CRASH_EXIT_CODE = 137  # what a shell reports for SIGKILL
_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Exit the process here if ``MNEMORAY_CRASH_AFTER`` names this point (``name[:n]``)."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point.strip() != name:
        return
    _hits[name] += 1
    if _hits[name] >= int(nth or 1):
        sys.stderr.write(f"{CRASH_ENV}={spec}: crashing at {name!r} (hit {_hits[name]})\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
