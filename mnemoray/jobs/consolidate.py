"""Consolidation of old memories, for cron / systemd timers / KubeRay RayCronJob.

    python -m mnemoray.jobs.consolidate --store /data/store [--config settings.yaml] [--app APP]...
        [--summarizer NAME] [--summarizer-option KEY=VALUE]... [--embedder SPEC]
        [--enforce-limits] [--dry-run] [--json] [--lock-file PATH]

Each run merges every user's old memories into ``consolidated_summary`` records and
forgets the originals whose expiry came (``mnemoray.memory.hygiene.consolidate``), then exits.
The policy per app is the ``hygiene.consolidation`` group of the settings file (the
one Serve reads; defaults without it); the summarizer and embedder are its
``models`` group unless a flag names them, instructed by the app's
``compaction.memory_prompt`` (LLM summarizers). Runs are idempotent (the consolidation
ledger in ``STORE/hygiene/``), so a schedule may run it as often as it likes.
``--enforce-limits`` then evicts every user over the ``hygiene.limits`` of the file (a
server enforces them after its own writes; a backfill's writes are checked here).

- **One run at a time**: an exclusive ``flock`` on ``STORE/schedule/consolidate.lock``
  (or ``--lock-file``); a run that finds it held says so and exits 0.
- **A report** per run in ``STORE/runs/<run id>.json`` (``kind: consolidation``).

`mnemoray memory consolidate` is this job with the same flags. Exit status: 0 done (or
another run holds the lock), 2 usage, configuration or store errors, 1 any other
failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mnemoray.errors import InvalidInput, MnemorayError
from mnemoray.jobs.scheduled_backfill import SCHEDULE_DIR, LockHeld, schedule_lock
from mnemoray.memory.store.protocol import missing_store, parse_location

if TYPE_CHECKING:  # imported when run: `--help` stays fast
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.settings.hygiene import HygieneSettings

PROG = "python -m mnemoray.jobs.consolidate"
LOCK_NAME = "consolidate.lock"


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Merge users' old memories into "
        "higher-level summaries (per app policy), expire originals "
        "that are due.",
    )
    p.add_argument(
        "--store", required=True, help="Memory store: a directory, parquet://DIR or lancedb://DIR."
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="Settings file (YAML/JSON): "
        "its hygiene.consolidation group (per app under hygiene.apps.<app>) and "
        "its models group.",
    )
    p.add_argument(
        "--app",
        dest="apps",
        action="append",
        default=None,
        help="Only this app (repeatable; default every app).",
    )
    p.add_argument(
        "--summarizer",
        default=None,
        help="Summarizer (default: models.summarizer of --config, else extractive).",
    )
    p.add_argument(
        "--summarizer-option",
        dest="summarizer_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Summarizer option (repeatable).",
    )
    p.add_argument(
        "--embedder",
        default=None,
        help="Embedder spec (default: models.embedder of --config, else the store's model).",
    )
    p.add_argument(
        "--enforce-limits",
        action="store_true",
        help="Then evict every user "
        "over the hygiene.limits of --config (writes that bypassed a server's "
        "hooks, e.g. a backfill, are not checked otherwise).",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="Print the groups that would be merged; write nothing.",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the report as JSON.")
    p.add_argument(
        "--lock-file",
        type=Path,
        default=None,
        help=f"Lock file (default STORE/{SCHEDULE_DIR}/{LOCK_NAME}).",
    )
    return p


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"expected KEY=VALUE, got {pair!r}", field="--summarizer-option")
        out[key] = value
    return out


def enforce_limits(service: MemoryService, hygiene: HygieneSettings) -> int:
    """One eviction pass over every user with a limit; how many memories were evicted."""
    from mnemoray.memory.hygiene.limits import UserLimits
    from mnemoray.memory.hygiene.usage import RecallUsage

    usage = RecallUsage.of_store(service.store.root) if hygiene.usage_needed else None
    try:
        limits = UserLimits(
            service, hygiene.limits_for(None), app_policies=hygiene.app_limits, usage=usage
        )
        return sum(len(ids) for ids in limits.enforce_all().values())
    finally:
        if usage is not None:
            usage.stop()


def memory_prompts(group: Mapping[str, Any] | None) -> Callable[[str], str | None]:
    """The per-app ``memory_prompt`` of the file's ``compaction`` group, the
    instructions an LLM summarizer gets for memories, consolidated ones included."""
    from pydantic import ValidationError

    from mnemoray.settings.base import errors_to_config_error
    from mnemoray.settings.compaction import CompactionSettings

    try:
        return CompactionSettings.model_validate(dict(group or {})).memory_prompt_for
    except ValidationError as exc:
        raise errors_to_config_error(exc, "compaction") from None


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One consolidation run as the flags say; its report (also written to the store)."""
    from mnemoray.memory.hygiene.consolidate import consolidate
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.memory.store.runs import new_run_id, write_run_report
    from mnemoray.settings.base import load_settings_file
    from mnemoray.settings.hygiene import hygiene_settings
    from mnemoray.summarizers import get_summarizer

    data = load_settings_file(args.config) if args.config is not None else {}
    hygiene = hygiene_settings(data.get("hygiene"))
    models = data.get("models") or {}
    name = args.summarizer or models.get("summarizer") or "extractive"
    # The file's options belong to the file's summarizer, not to one a flag names.
    base = {} if args.summarizer else dict(models.get("summarizer_options") or {})
    options = {**base, **_options(args.summarizer_options)}
    service = MemoryService.open(
        args.store,
        embedder=args.embedder or models.get("embedder") or "default",
        summarizer=get_summarizer(name, **options),
    )
    service.memory_prompt = memory_prompts(data.get("compaction"))
    run_id, started = new_run_id(), time.time()
    try:
        report = consolidate(
            service,
            hygiene.consolidation_for(None),
            app_policies=hygiene.app_consolidation,
            apps=args.apps,
            dry_run=args.dry_run,
        )
        evicted = (
            enforce_limits(service, hygiene) if args.enforce_limits and not args.dry_run else 0
        )
    finally:
        service.close()
    out = {
        "run_id": run_id,
        "kind": "consolidation",
        "status": "succeeded",
        "started_at": started,
        "finished_at": time.time(),
        "summarizer": name,
        **report.to_dict(),
        "memories_evicted": evicted,
    }
    if not args.dry_run:
        write_run_report(
            parse_location(args.store)[1], run_id, {k: v for k, v in out.items() if k != "planned"}
        )
    return out


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, prog: str = PROG) -> int:
    out = out if out is not None else sys.stderr
    args = parser(prog).parse_args(sys.argv[1:] if argv is None else argv)

    def say(msg: str) -> None:
        print(f"consolidation: {msg}", file=out, flush=True)

    try:
        why = missing_store(args.store)
        store_dir = parse_location(args.store)[1]
    except MnemorayError as exc:  # an unknown scheme, a damaged store: one line
        why = str(exc)
    if why is not None:
        say(f"error: {why}")
        return 2
    lock_path = args.lock_file or store_dir / SCHEDULE_DIR / LOCK_NAME
    try:
        with schedule_lock(lock_path):
            report = run(args)
    except LockHeld as held:
        say(f"another consolidation holds {lock_path} ({held}); nothing to do")
        return 0
    except (MnemorayError, ValueError, ImportError) as exc:
        say(f"error: {exc}")
        return 2
    except Exception as exc:
        say(f"failed: {type(exc).__name__}: {exc}")
        return 1
    if args.as_json:
        print(json.dumps(report, ensure_ascii=False), flush=True)
    else:
        for group in report["planned"]:
            print(
                f"{group['app_name']}/{group['user_id']}: would merge "
                f"{len(group['memory_ids'])} memories",
                flush=True,
            )
        print(
            f"{'would merge' if args.dry_run else 'merged'} "
            f"{report['originals_consolidated']} memories of {report['users']} user(s) "
            f"into {report['groups']} summaries; {report['originals_expired']} originals "
            f"expired; {report['memories_evicted']} evicted ({report['seconds']:.2f}s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
