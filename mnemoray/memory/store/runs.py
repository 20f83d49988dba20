"""Batch job bookkeeping: the JSON run report kept in the store, and progress lines.

Every backfill (in process or on Ray Data) writes ``STORE/runs/<run id>.json``:
status (``running`` while it goes, then ``succeeded``, ``failed`` or
``interrupted``; a killed job stays ``running`` with its last progress),
counts, throughput, seconds per stage and the config it ran with. A backfill
also records its commit timeline (``first_commit_s``, ``commit_timeline``:
seconds, sessions committed and manifest version of each commit, thinned for
long runs; ``commit_share_by_wall``) and rewrites the file at every commit, so
a killed job's record names everything it committed but the commit under way.
The file is replaced atomically, so a reader never sees half a report; ``gc``
leaves it.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from mnemoray.errors import InvalidInput
from mnemoray.files import atomic_write_bytes
from mnemoray.memory.store.layout import RUNS_DIR


def run_report_path(root: str | Path, run_id: str) -> Path:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise InvalidInput(f"not a usable file name: {run_id!r}", field="run_id")
    return Path(root) / RUNS_DIR / f"{run_id}.json"


def write_run_report(root: str | Path, run_id: str, report: Mapping[str, Any]) -> Path:
    """Write (or replace) the report of run ``run_id``; returns its path."""
    path = run_report_path(root, run_id)
    data = json.dumps(dict(report), indent=1, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(path, data.encode("utf-8"))
    return path


def read_run_reports(root: str | Path) -> list[dict[str, Any]]:
    """Every run report of the store, oldest first."""
    out = []
    for path in (Path(root) / RUNS_DIR).glob("*.json"):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(out, key=lambda r: (r.get("started_at") or 0.0, r.get("run_id") or ""))


def new_run_id() -> str:
    """A fresh run id: sortable by start time, unique."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


class RunRecorder:
    """The report of one running job, rewritten as it goes (at most every ``min_interval_s``).

    ``counts`` holds ``sessions_read`` (what throughput is measured in) and any
    other totals; ``stage_seconds`` the busy seconds per stage (summed over
    workers on Ray, so they can exceed the wall time).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        engine: str,
        config: Mapping[str, Any],
        kind: str = "backfill",
        run_id: str | None = None,
        min_interval_s: float = 5.0,
    ) -> None:
        self.root = Path(root)
        self.run_id = run_id or new_run_id()
        self.path = run_report_path(self.root, self.run_id)
        self.kind = kind
        self.engine = engine
        self.config = dict(config)
        self.started_at = time.time()
        self._t0 = time.perf_counter()
        self.counts: dict[str, int] = {}
        self.stage_seconds: dict[str, float] = {}
        self.extra: dict[str, Any] = {}
        self.status = "running"
        self.error: str | None = None
        self.min_interval_s = min_interval_s
        self._written = float("-inf")

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._t0

    def report(self) -> dict[str, Any]:
        seconds = self.seconds
        sessions = self.counts.get("sessions_read", 0)
        memories = self.counts.get("memories_written", 0)
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "engine": self.engine,
            "status": self.status,
            "error": self.error,
            "started_at": self.started_at,
            "finished_at": None if self.status == "running" else time.time(),
            "seconds": round(seconds, 3),
            "counts": dict(self.counts),
            "throughput": {
                "sessions_per_s": round(sessions / seconds, 3) if seconds else 0.0,
                "memories_per_s": round(memories / seconds, 3) if seconds else 0.0,
            },
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
            "config": self.config,
            **self.extra,
        }

    def update(
        self,
        counts: Mapping[str, int] | None = None,
        stage_seconds: Mapping[str, float] | None = None,
        *,
        force: bool = False,
        **extra: Any,
    ) -> None:
        if counts:
            self.counts.update(counts)
        if stage_seconds:
            self.stage_seconds.update(stage_seconds)
        self.extra.update(extra)
        now = time.perf_counter()
        if force or now - self._written >= self.min_interval_s:
            write_run_report(self.root, self.run_id, self.report())
            self._written = now

    def finish(self, status: str, error: str | None = None) -> Path:
        self.status, self.error = status, error
        self.update(force=True)
        return self.path


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """Sessions done, sessions/s and ETA, on one stream (stderr by default).

    On a terminal the line is redrawn in place (at most every ``redraw_s``);
    otherwise (a log file, ``ray job logs``) a full line is printed at most
    every ``interval_s`` seconds. ``total`` may be an estimate (or None: no ETA).
    """

    def __init__(
        self,
        total: int | None = None,
        *,
        label: str = "backfill",
        stream: TextIO | None = None,
        interval_s: float = 10.0,
        redraw_s: float = 0.2,
        tty: bool | None = None,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.interval_s = interval_s
        self.redraw_s = redraw_s
        self.started = time.perf_counter()
        self._last = float("-inf")
        self._drawn = False
        self._printed: tuple[int, str] | None = None
        self.done = 0

    def rate(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self, extra: str = "") -> str:
        rate = self.rate()
        if self.total:
            shown = max(self.total, self.done)
            head = f"{self.done}/{shown} sessions ({100.0 * self.done / shown:.1f}%)"
            left = max(shown - self.done, 0)
            eta = f"ETA {_clock(left / rate)}" if rate > 0 else "ETA ?"
        else:
            head, eta = f"{self.done} sessions", ""
        parts = [f"{self.label}: {head}", f"{rate:.1f} sessions/s", eta, extra]
        return "  ".join(p for p in parts if p)

    def update(self, done: int, extra: str = "", *, force: bool = False) -> None:
        self.done = done
        now = time.perf_counter()
        if not force and now - self._last < (self.redraw_s if self.tty else self.interval_s):
            return
        self._last = now
        self._printed = (done, extra)
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line(extra))
            self._drawn = True
        else:
            self.stream.write(self.line(extra) + "\n")
        self.stream.flush()

    def close(self, extra: str = "") -> None:
        """Print the final state (unless just printed), ending the live line on a terminal."""
        if self._printed != (self.done, extra):
            self.update(self.done, extra, force=True)
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
