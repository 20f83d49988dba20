"""The scheduled (incremental) backfill: watermark from run reports, lock, exit codes,
and the KubeRay / systemd manifests that run it."""

from __future__ import annotations

import configparser
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mnemoray.backfill.archive import write_archive
from mnemoray.jobs.scheduled_backfill import (
    LOCK_NAME,
    SCHEDULE_DIR,
    last_success,
    main,
    schedule_lock,
    select_files,
)
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports
from tests.support.archive_gen import make_archive, make_session

ROOT = Path(__file__).resolve().parents[2]
# In process and keyword-only: these tests are about scheduling, not the model.
FAST = ["--in-process", "--embedder", "none", "--shards", "2"]


def run(archive: Path, store: Path, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--archive", str(archive), "--store", str(store), *FAST, *extra], out=out)
    return code, out.getvalue()


def sessions_in(store: Path) -> set[str]:
    return {m.session_id for m in MemoryStore(store).load().iter_memories()}


def test_second_run_backfills_only_the_new_file(tmp_path: Path) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 6, files=2, bad=False)

    code, log = run(archive, store, "--slack-seconds", "0")
    assert code == 0, log
    assert "2 of 2 archive files" in log and "no earlier successful run" in log
    (first,) = read_run_reports(store)
    assert first["status"] == "succeeded" and first["counts"]["sessions_read"] == 6
    sched = first["schedule"]
    assert sched["archive"] == str(archive.resolve()) and sched["watermark"] is None
    assert sorted(sched["files"]) == ["part-000.jsonl", "part-001.parquet"]
    assert sched["scanned_at"] <= first["started_at"]
    assert sessions_in(store) == {f"s{i:04d}" for i in range(6)}

    # Nothing changed: no backfill at all (no new report).
    code, log = run(archive, store, "--slack-seconds", "0")
    assert code == 0 and "nothing new" in log
    assert len(read_run_reports(store)) == 1

    # A new file in a subdirectory: only it is read.
    write_archive([make_session(i) for i in (100, 101, 102)], archive / "2025" / "new.jsonl")
    code, log = run(archive, store, "--slack-seconds", "0")
    assert code == 0, log
    assert "1 of 3 archive files" in log
    second = read_run_reports(store)[-1]
    assert second["run_id"] != first["run_id"] and second["status"] == "succeeded"
    assert second["schedule"]["files"] == ["2025/new.jsonl"]
    assert second["schedule"]["watermark"] == pytest.approx(sched["scanned_at"])
    assert second["counts"]["sessions_read"] == 3 and second["counts"]["skipped"] == 0
    assert sessions_in(store) == {f"s{i:04d}" for i in (*range(6), 100, 101, 102)}
    # The staging directory of links is gone.
    assert not list((store / SCHEDULE_DIR).glob("staging-*"))


def test_reselected_files_are_skipped_by_the_ledger(tmp_path: Path) -> None:
    """The default slack re-reads recent files: the ledger makes that a no-op."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 4, files=2, bad=True)
    assert run(archive, store)[0] == 0
    before = MemoryStore(store).manifest().version
    code, log = run(archive, store)  # slack 300 s: everything is "recent" again
    assert code == 0, log
    again = read_run_reports(store)[-1]
    assert again["counts"]["sessions_read"] == 7  # 4 sessions + 3 bad rows, re-read
    assert again["counts"]["skipped"] == 4 and again["counts"]["memories_written"] == 0
    assert MemoryStore(store).quarantine_count() == 3  # re-quarantined rows count once
    assert MemoryStore(store).manifest().version >= before


def test_failed_run_exits_one_and_does_not_move_the_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mnemoray.backfill.commit as commit

    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 2, files=1, bad=False)
    assert run(archive, store, "--slack-seconds", "0")[0] == 0
    write_archive([make_session(50)], archive / "late.jsonl")

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(commit, "commit_chunk", disk_full)
        code, log = run(archive, store, "--slack-seconds", "0")
    assert code == 1 and "backfill failed: OSError" in log, log
    failed = read_run_reports(store)[-1]
    assert failed["status"] == "failed" and failed["schedule"]["files"] == ["late.jsonl"]
    assert not list((store / SCHEDULE_DIR).glob("staging-*"))

    code, log = run(archive, store, "--slack-seconds", "0")  # the retry still sees the file
    assert code == 0 and "1 of 2 archive files" in log, log
    assert "s0050" in sessions_in(store)


def test_a_manual_full_backfill_counts_as_the_last_run(tmp_path: Path) -> None:
    from mnemoray.jobs.backfill import main as backfill_main

    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 3, files=1, bad=False)
    assert backfill_main(["--archive", str(archive), "--store", str(store), *FAST]) == 0
    mark = last_success(store, archive.resolve())
    assert mark.at is not None and mark.run_id == read_run_reports(store)[0]["run_id"]
    code, log = run(archive, store, "--slack-seconds", "0")
    assert code == 0 and "nothing new" in log
    # A different archive does not share the watermark.
    assert last_success(store, (tmp_path / "other").resolve()).at is None


def test_a_file_renamed_in_with_an_old_mtime_is_new(tmp_path: Path) -> None:
    """Writers publish by rename and `cp -p` keeps mtimes: ctime catches both."""
    archive = tmp_path / "archive"
    make_archive(archive, 2, files=1, bad=False)
    time.sleep(0.05)  # file times come from a coarse kernel clock
    since = time.time()  # the last run's scan
    time.sleep(0.05)
    outside = write_archive([make_session(7)], tmp_path / "elsewhere.jsonl")
    os.utime(outside, (since - 86400, since - 86400))  # mtime: yesterday (cp -p, rsync -t)
    os.replace(outside, archive / "moved-in.jsonl")  # ctime: now
    assert (archive / "moved-in.jsonl").stat().st_mtime < since
    new, total = select_files(archive, since, slack_s=0.0)
    assert [name for _, name in new] == ["moved-in.jsonl"] and total == 2


def test_overlapping_run_exits_zero_without_running(tmp_path: Path) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 2, files=1, bad=False)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "mnemoray.jobs.scheduled_backfill",
        "--archive",
        str(archive),
        "--store",
        str(store),
        *FAST,
    ]
    with schedule_lock(store / SCHEDULE_DIR / LOCK_NAME):  # a run in progress
        held = (store / SCHEDULE_DIR / LOCK_NAME).read_text()
        assert f"pid {os.getpid()}" in held
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "another scheduled backfill holds" in proc.stderr
        assert f"pid {os.getpid()}" in proc.stderr
        assert read_run_reports(store) == []  # it ran nothing
        # The same process cannot take it twice either (flock: per open file).
        code, log = run(archive, store)
        assert code == 0 and "another scheduled backfill holds" in log
    # Released: the next tick runs.
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in read_run_reports(store)] == ["succeeded"]


def test_usage_errors_exit_non_zero(tmp_path: Path) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 2, files=1, bad=False)
    assert run(archive, store)[0] == 0
    code, _ = (
        main(
            [
                "--archive",
                str(archive),
                "--store",
                str(store),
                "--in-process",
                "--embedder",
                "none",
                "--shards",
                "3",
                "--full",
            ],
            out=io.StringIO(),
        ),
        None,
    )
    assert code == 2  # the store has 2 shards: the backfill refuses, before any work
    code = main(["--archive", str(tmp_path / "missing"), "--store", str(store)], out=io.StringIO())
    assert code == 2


def test_dry_run_lists_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 3, files=3, bad=False)
    assert run(archive, store, "--dry-run")[0] == 0
    assert capsys.readouterr().out.split() == [
        "part-000.jsonl",
        "part-001.jsonl",
        "part-002.parquet",
    ]
    assert read_run_reports(store) == []


# -- the manifests that run it ------------------------------------------------------------
def test_raycronjob_manifest() -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy/k8s/rayjob-cron.yaml").read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    pvcs = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert {p["metadata"]["name"] for p in pvcs} == {"mnemoray-store", "mnemoray-archive"}
    assert all(p["spec"]["accessModes"] == ["ReadWriteMany"] for p in pvcs)

    cron = by_kind["RayCronJob"]
    assert cron["apiVersion"] == "ray.io/v1"
    assert len(cron["spec"]["schedule"].split()) == 5
    job = cron["spec"]["jobTemplate"]
    entry = job["entrypoint"].split()
    assert entry[:3] == ["python", "-m", "mnemoray.jobs.scheduled_backfill"]
    archive, store = entry[entry.index("--archive") + 1], entry[entry.index("--store") + 1]
    assert job["shutdownAfterJobFinishes"] is True
    assert yaml.safe_load(job["runtimeEnvYAML"])["env_vars"]["HF_HUB_OFFLINE"] == "1"

    cluster = job["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [
        g["template"]["spec"] for g in cluster["workerGroupSpecs"]
    ]
    for pod in pods:
        (container,) = pod["containers"]
        assert "PLACEHOLDER" in _line_of(container["image"])  # clearly marked
        assert container["resources"]["requests"]["cpu"]
        assert container["resources"]["limits"]["memory"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        # Every node sees the archive and the store at the paths the entrypoint names.
        assert claims[mounts[store]] == "mnemoray-store"
        assert claims[mounts[archive]] == "mnemoray-archive"


def _line_of(value: str) -> str:
    text = (ROOT / "deploy/k8s/rayjob-cron.yaml").read_text()
    return next(line for line in text.splitlines() if value in line)


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # keys are case-sensitive in systemd
    parser.read_string(path.read_text())
    return parser


def test_systemd_units() -> None:
    service = _unit(ROOT / "deploy/systemd/mnemoray-backfill.service")
    timer = _unit(ROOT / "deploy/systemd/mnemoray-backfill.timer")
    assert service["Service"]["Type"] == "oneshot"
    start = service["Service"]["ExecStart"].replace("\\\n", " ").split()
    assert start[1:3] == ["-m", "mnemoray.jobs.scheduled_backfill"]
    assert "--archive" in start and "--store" in start
    assert timer["Timer"]["Unit"] == "mnemoray-backfill.service"
    assert timer["Timer"]["OnCalendar"] and timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"


def test_run_report_schedule_is_json(tmp_path: Path) -> None:
    """The annotation keeps the report readable by the store's own reader."""
    archive, store = tmp_path / "archive", tmp_path / "store"
    make_archive(archive, 1, files=1, bad=False)
    assert run(archive, store)[0] == 0
    (path,) = (store / "runs").glob("*.json")
    data = json.loads(path.read_text())
    assert data["schedule"]["files_selected"] == 1 and data["schedule"]["files_total"] == 1
