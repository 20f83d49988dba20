"""Reliability of the store on disk: each known kind of damage to a backfilled store
must be detected (no wrong data served; tenants of healthy shards keep being served),
named by ``mnemoray doctor``, and undone by ``doctor --repair`` plus a re-run of the
backfill: the store then serves exactly what the undamaged one serves."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.backfill_kill import committed, kill_at, served, start_job
from benchmarks.datagen import DatasetConfig, generate, write_dataset
from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.errors import StoreCorrupt
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import (
    INDEX_DIR,
    LEDGER_DIR,
    MANIFEST,
    MEMORIES_DIR,
    TOMBSTONES_DIR,
)
from mnemoray.memory.store.ops import doctor
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports

SHARDS = 4
QUERY = "what do I do for work and where do I live"
Answers = dict[tuple[str, str], Any]


def _answers(root: Path, tenants: list[tuple[str, str]]) -> Answers:
    """Per tenant: its memory ids and its top-5 recall, or the error class it got."""
    out: Answers = {}
    try:
        service = MemoryService.open(root)
    except StoreCorrupt:
        return dict.fromkeys(tenants, "StoreCorrupt")
    except Exception as exc:  # anything but the typed refusal is a finding
        return dict.fromkeys(tenants, type(exc).__name__)
    try:
        for t in tenants:
            try:
                ids = sorted(m.memory_id for m in service.list_memories(*t, limit=10_000)[0])
                top = sorted(r.memory_id for r in service.search(*t, QUERY, top_k=5))
                out[t] = (ids, top)
            except StoreCorrupt:
                out[t] = "StoreCorrupt"
            except Exception as exc:
                out[t] = type(exc).__name__
    finally:
        service.close()
    return out


def _files(root: Path, sub: str, suffix: str) -> list[Path]:
    return sorted((root / sub).rglob(f"*{suffix}"))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "manifest missing": lambda r: (r / MANIFEST).unlink(),
    "manifest truncated": lambda r: _truncate(r / MANIFEST),
    "manifest binary": lambda r: (r / MANIFEST).write_bytes(os.urandom(512)),
    "segment truncated": lambda r: _truncate(_files(r, MEMORIES_DIR, ".parquet")[0]),
    "index missing": lambda r: _files(r, INDEX_DIR, ".faiss")[0].unlink(),
    "index garbage": lambda r: _files(r, INDEX_DIR, ".faiss")[0].write_bytes(os.urandom(4096)),
    "ledger lost": lambda r: [p.unlink() for p in _files(r, LEDGER_DIR, "")],
    "tombstones lost": lambda r: [p.unlink() for p in _files(r, TOMBSTONES_DIR, "")],
}


def _verdict(before: Answers, clean: Answers) -> dict[str, int]:
    n = {"served_as_clean": 0, "refused": 0, "wrong": 0, "other_error": 0}
    for t, want in clean.items():
        got = before[t]
        key = (
            "served_as_clean"
            if got == want
            else "refused"
            if got == "StoreCorrupt"
            else "other_error"
            if isinstance(got, str)
            else "wrong"
        )
        n[key] += 1
    return n


def corrupt_cases(work: Path, log: Callable[[str], None], *, sessions: int) -> dict[str, Any]:
    data = work / "data"
    users = 8
    write_dataset(
        generate(DatasetConfig(users=users, sessions_per_user=max(1, sessions // users))), data
    )
    archive = data / "archive"

    def run(store: Path) -> Any:
        return backfill(
            BackfillConfig(
                archive=archive, store=store, shards=SHARDS, commit_every=8, progress_interval_s=0
            )
        )

    clean = work / "clean"
    run(clean)
    service = MemoryService.open(clean)
    tenants = sorted(service.snapshot().tenants())
    victim = tenants[0]
    forgotten = service.list_memories(*victim, limit=1)[0][0].memory_id
    service.forget_memory(*victim, forgotten)  # a tombstone exists to be lost
    service.close()
    model = MemoryStore(clean).manifest().embedding_model
    want = _answers(clean, tenants)
    log(
        f"clean store: {len(tenants)} tenants over {SHARDS} shards, "
        f"{MemoryStore(clean).manifest().rows} rows"
    )
    cases: dict[str, Any] = {}
    for name, damage in DAMAGE.items():
        root = work / name.replace(" ", "-")
        shutil.copytree(clean, root)
        damage(root)
        files_before = sorted(p for p in root.rglob("*") if p.is_file())
        verdict = _verdict(_answers(root, tenants), want)
        try:
            MemoryStore(root).gc()
            gc = "ran"
        except StoreCorrupt:
            gc = "refused"
        kept = all(p.exists() for p in files_before if MEMORIES_DIR in p.parts)
        found = doctor.diagnose(root)
        fixed = doctor.repair(root, embedding_model=model)
        rerun = run(root) if fixed.healthy else None
        after = _verdict(_answers(root, tenants), want)
        restored = after["served_as_clean"] == len(tenants)
        if name == "tombstones lost":  # not repairable by design: restore from a backup
            outcome = (
                f"{verdict['served_as_clean']} served, {verdict['refused']} refused, "
                f"{verdict['wrong']} wrong; not repaired by design (restore the "
                f"file from a backup)"
            )
        else:
            outcome = (
                f"{verdict['served_as_clean']} served, {verdict['refused']} refused, "
                f"{verdict['wrong']} wrong; repair + re-run: "
                f"{'restored' if restored else 'NOT restored'}"
                + (f" ({rerun.ledger_hits} ledger hits)" if rerun else "")
            )
        cases[name] = {
            "detected_by": f"doctor: {len(found.problems)} problem(s)",
            "outcome": outcome,
            "before_repair": verdict,
            "gc": gc,
            "segment_files_kept": kept,
            "problems": found.problems,
            "repaired": fixed.repaired,
            "left": fixed.left,
            "reingest": len(fixed.reingest),
            "after_repair": after,
            "restored": restored,
            "rerun_ledger_hits": rerun.ledger_hits if rerun else None,
        }
        log(f"{name}: {outcome}")
    return {"tenants": len(tenants), "shards": SHARDS, "cases": cases}


# -- backfill kills -------------------------------------------------------------------------
def _new_record(store: Path, seen: set[str]) -> dict[str, Any]:
    (new,) = [r for r in read_run_reports(store) if r["run_id"] not in seen]
    seen.add(new["run_id"])
    return new


def backfill_kills(work: Path, log: Callable[[str], None], *, sessions: int) -> dict[str, Any]:
    """A Ray Data backfill (default embedder) SIGKILLed after 10%, 30% and 60% of its
    commits, re-run each time, then run to the end; once killing the driver only, once
    the whole local Ray with it. Compared with one clean in-process run."""
    users = max(1, sessions // 10)
    write_dataset(generate(DatasetConfig(users=users, sessions_per_user=10)), work / "data")
    archive = work / "data" / "archive"
    every = max(4, sessions // 20)
    flags = ("--shards", str(SHARDS), "--commit-every", str(every), "--batch-size", str(every))
    clean_store = work / "clean"
    backfill(
        BackfillConfig(
            archive=archive,
            store=clean_store,
            shards=SHARDS,
            commit_every=every,
            progress_interval_s=0,
        )
    )
    clean = served(clean_store)
    total = users * 10
    out: dict[str, Any] = {"sessions": total, "commit_every": every, "kills": {}}
    for kill in ("driver", "ray"):
        store, seen, before, points = work / f"store-{kill}", set(), 0, []
        for share in (0.1, 0.3, 0.6):
            target = max(math.ceil(share * total), before + 2 * every)
            kill_at(start_job(archive, store, *flags), store, target, kill, timeout_s=900)
            now = committed(store)
            counts = _new_record(store, seen)["counts"]
            partial = served(store)
            points.append(
                {
                    "share": share,
                    "committed": now,
                    "ledger_hits": counts["ledger_hits"],
                    "redone": counts["ledger_hits"] != before,
                    "duplicates": sum(partial.values()) - len(partial),
                    "subset_of_clean": set(partial) <= set(clean),
                }
            )
            log(f"backfill kill ({kill}) at {share:.0%}: {now}/{total} sessions committed")
            before = now
        job = start_job(archive, store, *flags)
        stdout, stderr = job.communicate(timeout=1800)
        report = json.loads(stdout.strip().splitlines()[-1]) if job.returncode == 0 else {}
        final = served(store)
        same = final == clean
        run = {
            "killed_after": "10%, 30%, 60% of commits",
            "kills": points,
            "rerun_rc": job.returncode,
            "rerun_ledger_hits": report.get("ledger_hits"),
            "committed_before_rerun": before,
            "served_as_clean": same,
            "duplicates": sum(final.values()) - len(final),
        }
        run["outcome"] = (
            f"re-run: {run['rerun_ledger_hits']} ledger hits of {before} committed, "
            f"{'0 redone' if not any(p['redone'] for p in points) else 'REDONE'}; "
            f"store {'== clean run' if same else 'DIFFERS from a clean run'}, "
            f"{run['duplicates']} duplicates"
        )
        if job.returncode != 0:
            run["error"] = stderr[-2000:]
        out["kills"][kill] = run
        log(f"backfill kills ({kill}): {run['outcome']}")
    return out


__all__ = ["DAMAGE", "backfill_kills", "corrupt_cases"]
