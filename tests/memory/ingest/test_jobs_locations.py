"""The scheduled jobs take a store location like every command (a path, parquet://DIR,
lancedb://DIR): the backfill gets the URI, the job's reports and lock live in its
directory, and a bad location is one line with exit code 2."""

from __future__ import annotations

import io
from pathlib import Path

from mnemoray.jobs.consolidate import main as consolidate_main
from mnemoray.jobs.scheduled_backfill import main as scheduled_main
from mnemoray.memory.store.protocol import open_backend
from mnemoray.memory.store.runs import read_run_reports
from tests.support.archive_gen import make_archive

FAST = ["--in-process", "--embedder", "none"]


def test_a_scheduled_backfill_into_a_lancedb_store(tmp_path: Path) -> None:
    archive, root = tmp_path / "archive", tmp_path / "ln"
    make_archive(archive, 4, files=2, bad=False)
    out = io.StringIO()
    code = scheduled_main(
        ["--archive", str(archive), "--store", f"lancedb://{root}", "--slack-seconds", "0", *FAST],
        out=out,
    )
    assert code == 0, out.getvalue()
    assert open_backend(f"lancedb://{root}").backend == "lancedb"  # not a Parquet store
    (report,) = read_run_reports(root)  # in the store's own directory
    assert report["status"] == "succeeded" and report["schedule"]["files_selected"] == 2
    again = io.StringIO()
    assert (
        scheduled_main(
            [
                "--archive",
                str(archive),
                "--store",
                f"lancedb://{root}",
                "--slack-seconds",
                "0",
                *FAST,
            ],
            out=again,
        )
        == 0
    )
    assert "nothing new" in again.getvalue()  # the watermark was read from there too


def test_bad_locations_are_one_line(tmp_path: Path) -> None:
    for main, extra in ((scheduled_main, ["--archive", str(tmp_path)]), (consolidate_main, [])):
        out = io.StringIO()
        code = main(["--store", "s3://bucket/mem", *extra], out=out)
        assert code == 2 and "is not supported here" in out.getvalue(), out.getvalue()
        assert len(out.getvalue().strip().splitlines()) == 1
    out = io.StringIO()
    assert consolidate_main(["--store", f"lancedb://{tmp_path / 'none'}"], out=out) == 2
    assert "no memory store" in out.getvalue() and "lancedb.json" in out.getvalue()
