"""Incremental backfill for cron / systemd timers / KubeRay RayCronJob.

    python -m mnemoray.jobs.scheduled_backfill --archive /data/archive --store /data/store \\
        [--slack-seconds 300] [--lock-file PATH] [--full] [--dry-run] [BACKFILL FLAGS...]

Each run backfills only the archive files that changed since the last
SUCCESSFUL backfill of the same archive into the same store, then exits:

- **Watermark.** The store's run reports (``STORE/runs/*.json``, status
  ``succeeded``) are the only state. A scheduled run records, in its own
  report, the archive it served and ``scanned_at``: the time it listed the
  archive. The watermark is the newest such ``scanned_at``; a plain
  ``mnemoray backfill`` / ``python -m mnemoray.jobs.backfill`` of the whole archive
  counts too (its ``started_at``). No successful run yet: everything is new.
- **What "new" means: a FILE whose change time is at or after the watermark
  minus ``--slack-seconds``**, change time = max(st_mtime, st_ctime). Not the
  sessions' ``updated_at`` / ``ended_at``: those say when a conversation
  happened, not when it reached the archive. An exporter that runs late,
  retries, or re-exports last month would land sessions whose ``updated_at``
  is older than the last run, and a filter on session time would drop them
  for good. Only the file's arrival time is safe. ``st_ctime`` is included
  because writers publish files by rename (``mnemoray.backfill.archive.write_archive``
  does), and ``rsync -t`` / ``cp -p`` keep an old mtime: a file renamed into
  the archive after the last scan can carry an mtime from before it, but its
  ctime (which nobody can set back) moves on rename. The slack absorbs clock
  skew between the writer's host and this one (NFS) and the moments between
  a run's listing and its report; what it re-selects costs a read, nothing
  more (see below).
- **Idempotency stays with the ledger.** Files are handed to the backfill
  unmodified (the ledger key is the hash of the raw row), so a re-selected
  file, or a JSONL file that grew by appends, is re-read and every session
  already processed is skipped. The selection only saves the reading.
- **The same backfill.** The selected files are linked into a staging
  directory inside the store (``STORE/schedule/staging-*``, same relative
  paths, so quarantine locations read as they would for the whole archive)
  and the backfill's Python API runs on it, configured by the flags of
  ``mnemoray.jobs.backfill`` passed through:
  ``--shards``, ``--summarizer``, ``--workers``, ``--batch-size``,
  ``--ray-address``, ``--in-process``... On a cluster the archive and the
  store must be at the same paths on every node (they must be for a plain
  backfill too); the links point at absolute archive paths.
- **One run at a time.** An exclusive ``flock`` on ``STORE/schedule/lock``
  (or ``--lock-file``) is held for the whole run. A run that finds it held
  prints why and exits 0: an overlapping cron tick is not a failure. The
  lock dies with its process, so a killed run never blocks the next one.
  (On NFS, flock needs NFSv4 or lockd; else put ``--lock-file`` on a local
  disk of the one host that runs the schedule.)

Exit status: 0 when the backfill succeeded, nothing was new, or another run
holds the lock; 2 for usage, configuration or store errors (the backfill's
flags included); 1 when the backfill failed otherwise.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from mnemoray.backfill import BackfillReport
from mnemoray.backfill.archive import archive_files
from mnemoray.errors import Conflict, MnemorayError
from mnemoray.jobs.backfill import parse
from mnemoray.jobs.backfill import run as run_backfill
from mnemoray.memory.store.protocol import absolute_location, parse_location
from mnemoray.memory.store.runs import (
    new_run_id,
    read_run_reports,
    run_report_path,
    write_run_report,
)
from mnemoray.summarizers.errors import ModelUnavailableError

SCHEDULE_DIR = "schedule"  # STORE/schedule/: the lock file and staging directories
LOCK_NAME = "lock"
STAGING_PREFIX = "staging-"
DEFAULT_SLACK_S = 300.0
PROG = "python -m mnemoray.jobs.scheduled_backfill"


# -- what is new ------------------------------------------------------------------------
def changed_at(path: Path) -> float:
    """When the file last changed content or place: max(mtime, ctime), following links."""
    st = path.stat()
    return max(st.st_mtime, st.st_ctime)


def _same_path(a: Any, b: Path) -> bool:
    if not isinstance(a, str) or not a:
        return False
    try:
        return Path(a).resolve() == b
    except OSError:
        return False


@dataclass(frozen=True)
class Watermark:
    at: float | None  # None: no successful run of this archive yet
    run_id: str | None = None


def last_success(store: Path, archive: Path) -> Watermark:
    """The newest successful backfill of ``archive`` (resolved) into ``store``."""
    best = Watermark(None)
    for report in read_run_reports(store):
        if report.get("status") != "succeeded" or report.get("kind", "backfill") != "backfill":
            continue
        sched = report.get("schedule") or {}
        if sched:
            ok, at = _same_path(sched.get("archive"), archive), sched.get("scanned_at")
        else:  # a manual backfill of the whole archive covers it too
            ok = _same_path((report.get("config") or {}).get("archive"), archive)
            at = report.get("started_at")
        if ok and isinstance(at, (int, float)) and (best.at is None or at > best.at):
            best = Watermark(float(at), report.get("run_id"))
    return best


def select_files(
    archive: Path,
    since: float | None,
    slack_s: float,
) -> tuple[list[tuple[Path, str]], int]:
    """(new files with their archive-relative names, files in the archive)."""
    files = archive_files(archive)
    if since is None:
        return files, len(files)
    cutoff = since - slack_s
    new = []
    for path, name in files:
        try:
            if changed_at(path) >= cutoff:
                new.append((path, name))
        except FileNotFoundError:  # removed since the listing: nothing to read
            continue
    return new, len(files)


# -- staging and locking ----------------------------------------------------------------
def stage(files: Sequence[tuple[Path, str]], root: Path) -> Path:
    """A directory of symlinks to ``files`` under their archive-relative names."""
    staging = (
        root / f"{STAGING_PREFIX}{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-"
        f"{uuid.uuid4().hex[:8]}"
    )
    for path, name in files:
        link = staging / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path.resolve())
    staging.mkdir(parents=True, exist_ok=True)
    return staging


def remove_stale_staging(root: Path) -> None:
    """Staging directories left by killed runs (only called with the lock held)."""
    if root.is_dir():
        for old in root.glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(old, ignore_errors=True)


class LockHeld(Conflict):
    """Another run holds the schedule lock (the message names the holder)."""


@contextmanager
def schedule_lock(path: Path) -> Iterator[None]:
    """Exclusive, non-blocking flock; raises LockHeld (with the holder's note) if taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            handle.seek(0)
            raise LockHeld(handle.read().strip() or "unknown holder") from None
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} on {os.uname().nodename} since {_iso(time.time())}\n")
            handle.flush()
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# -- run --------------------------------------------------------------------------------
def _iso(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


class UsageError(Exception):
    """The backfill refused its flags, the store or the archive before any work."""


def run_backfill_job(argv: Sequence[str], run_id: str) -> tuple[BackfillReport, bool]:
    """The backfill configured by ``mnemoray.jobs.backfill`` flags, recorded as run ``run_id``;
    its report and whether ``--json`` was asked for."""
    try:
        config, engine_name, as_json = parse(argv)
    except SystemExit as exc:  # argparse: usage already printed
        raise UsageError(f"bad backfill flags (status {exc.code})") from None
    try:
        return run_backfill(replace(config, run_id=run_id), engine_name), as_json
    except (MnemorayError, ValueError, ImportError, ModelUnavailableError) as exc:
        if run_report_path(parse_location(config.store)[1], run_id).is_file():
            raise  # it had started: a failed run, not a usage error
        raise UsageError(str(exc)) from exc


def annotate(store: Path, run_id: str, schedule: dict[str, Any]) -> None:
    """Add ``schedule`` to the report of run ``run_id`` (if it got as far as writing one)."""
    path = run_report_path(store, run_id)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return
    report["schedule"] = schedule
    write_run_report(store, run_id, report)


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Backfill only the archive files that changed since the last "
        "successful run (any other flag goes to `python -m mnemoray.jobs.backfill`).",
        epilog="Flags not listed here are passed to `python -m mnemoray.jobs.backfill` (same as "
        "`mnemoray backfill`): --shards, --summarizer, --workers, --batch-size, "
        "--ray-address, --in-process, --json, ...",
    )
    p.add_argument(
        "--archive", required=True, type=Path, help="Session archive directory (or one file)."
    )
    p.add_argument(
        "--store", required=True, help="Memory store: a directory, parquet://DIR or lancedb://DIR."
    )
    p.add_argument(
        "--slack-seconds",
        type=float,
        default=DEFAULT_SLACK_S,
        help="Also take files changed up to this long before the watermark "
        "(clock skew; re-reading costs only a read: the ledger skips). "
        f"Default {DEFAULT_SLACK_S:g}.",
    )
    p.add_argument(
        "--lock-file",
        type=Path,
        default=None,
        help=f"Lock file (default STORE/{SCHEDULE_DIR}/{LOCK_NAME}).",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="Ignore the watermark: hand every archive file to the backfill.",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="Print the files that would be backfilled, run nothing.",
    )
    args, rest = p.parse_known_args(list(argv))
    if args.slack_seconds < 0:
        p.error("--slack-seconds: must be >= 0")
    return args, rest


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stderr
    args, rest = parse_args(sys.argv[1:] if argv is None else argv)

    def say(msg: str) -> None:
        print(f"scheduled backfill: {msg}", file=out, flush=True)

    if not args.archive.exists():
        say(f"error: archive {args.archive} does not exist")
        return 2
    try:  # the URI goes to the backfill as given; its directory holds reports and the lock
        parse_location(args.store)  # an unknown scheme is an error, not a directory name
        location = absolute_location(args.store)
        store = parse_location(location)[1]
    except MnemorayError as exc:
        say(f"error: {exc}")
        return 2
    archive = args.archive.resolve()
    sched_root = store / SCHEDULE_DIR
    lock_path = args.lock_file or sched_root / LOCK_NAME
    try:
        with schedule_lock(lock_path):
            return _locked_run(args, rest, archive, location, store, sched_root, say)
    except LockHeld as held:
        say(f"another scheduled backfill holds {lock_path} ({held}); nothing to do")
        return 0


def _locked_run(
    args: argparse.Namespace,
    rest: list[str],
    archive: Path,
    location: str,
    store: Path,
    sched_root: Path,
    say,
) -> int:
    """``location``: the store as the backfill is given it; ``store``: its directory."""
    remove_stale_staging(sched_root)
    mark = Watermark(None) if args.full else last_success(store, archive)
    scanned_at = time.time()  # BEFORE listing: a file landing during the listing is newer
    try:
        files, total = select_files(archive, mark.at, args.slack_seconds)
    except ValueError as exc:  # ArchiveError: unsupported single file
        say(f"error: {exc}")
        return 2
    since = (
        f"changed since {_iso(mark.at)} (run {mark.run_id}, slack {args.slack_seconds:g}s)"
        if mark.at is not None
        else "no earlier successful run"
    )
    say(f"{len(files)} of {total} archive files to backfill; {since}")
    if args.dry_run:
        for _, name in files:
            print(name, flush=True)
        return 0
    if not files:
        say("nothing new; done")
        return 0
    staging = stage(files, sched_root)
    schedule = {
        "archive": str(archive),
        "scanned_at": scanned_at,
        "watermark": mark.at,
        "watermark_run_id": mark.run_id,
        "slack_s": args.slack_seconds,
        "full": bool(args.full),
        "files_selected": len(files),
        "files_total": total,
        "files": [name for _, name in files][:1000],
    }
    run_id = new_run_id()
    try:
        report, as_json = run_backfill_job(
            ["--archive", str(staging), "--store", location, *rest], run_id
        )
    except UsageError as exc:
        say(f"error: {exc}")
        return 2
    except BaseException as exc:
        annotate(store, run_id, schedule)  # the failed report says what it was given
        if isinstance(exc, Exception):
            say(f"backfill failed: {type(exc).__name__}: {exc}")
            return 1
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    annotate(store, run_id, schedule)
    print(json.dumps(report.to_dict()) if as_json else report.summary(), flush=True)
    say(
        f"run {run_id} succeeded: {len(files)} files, {report.sessions_read} sessions read, "
        f"{report.skipped} skipped, {report.memories_written} memories written; watermark "
        f"now {_iso(scanned_at)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
