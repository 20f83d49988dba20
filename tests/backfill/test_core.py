"""The one backfill core: config checks, engine flags that are refused, one report type."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mnemoray.backfill import BackfillConfig, BackfillReport, RayOptions, backfill
from mnemoray.cli.main import app
from mnemoray.errors import InvalidInput
from mnemoray.jobs.backfill import parser as job_parser
from mnemoray.memory.store.runs import read_run_reports
from mnemoray.pipeline.backfill import RayDataEngine, engine
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.archive_gen import make_archive

runner = CliRunner()


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    make_archive(tmp_path / "archive", 4, files=1, bad=False, parquet=False)
    return tmp_path / "archive"


@pytest.mark.parametrize(
    ("option", "flag"),
    [
        ({"workers": 2}, "--workers"),
        ({"gpus_per_embedder": 1.0}, "--gpus-per-embedder"),
        ({"address": "ray://x:1"}, "--ray-address"),
    ],
)
def test_in_process_refuses_ray_options(
    tmp_path: Path, archive: Path, option: dict, flag: str
) -> None:
    config = BackfillConfig(archive, tmp_path / "store", embedder=None, ray=RayOptions(**option))
    with pytest.raises(InvalidInput, match=flag) as raised:
        backfill(config)
    assert raised.value.field == f"ray.{next(iter(option))}"
    assert not (tmp_path / "store").exists()  # refused before any work


def test_cli_in_process_with_a_ray_flag_is_a_usage_error(tmp_path: Path, archive: Path) -> None:
    for extra in (["--workers", "1"], ["--batch-size", "8"], ["--llm-concurrency", "2"]):
        result = runner.invoke(
            app,
            [
                "backfill",
                "--archive",
                str(archive),
                "--store",
                str(tmp_path / "store"),
                "--embedder",
                "none",
                "--in-process",
                *extra,
            ],
        )
        assert result.exit_code == 2 and extra[0] in result.output, result.output
    assert not (tmp_path / "store").exists()


def test_config_checks_name_the_field(tmp_path: Path) -> None:
    bad = [
        ({"commit_every": 0}, "commit_every"),
        ({"summarizer": "nope"}, "summarizer"),
        ({"embedder": "default,threads=x"}, "embedder"),
        ({"ray": RayOptions(workers=0)}, "ray.workers"),
    ]
    for change, field in bad:
        with pytest.raises(InvalidInput) as raised:
            BackfillConfig("a", "s", **change).check()
        assert (raised.value.field or "").startswith(field), raised.value
    with pytest.raises(InvalidInput, match="summarizer"):
        RayDataEngine().check(BackfillConfig("a", "s", summarizer=ExtractiveSummarizer()))
    with pytest.raises(InvalidInput, match="engine"):
        engine("spark")


def test_one_report_type_and_run_record(tmp_path: Path, archive: Path) -> None:
    store = tmp_path / "store"
    result = runner.invoke(
        app,
        [
            "backfill",
            "--archive",
            str(archive),
            "--store",
            str(store),
            "--embedder",
            "none",
            "--in-process",
            "--commit-every",
            "3",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) == {f.name for f in dataclasses.fields(BackfillReport)}
    assert (out["engine"], out["sessions_read"], out["commits"]) == ("in_process", 4, 2)
    assert out["sessions_committed"] == 4 and out["memories_written"] > 4
    assert {"read", "validate", "distill", "embed", "write", "commit"} <= set(out["stage_seconds"])
    # CPU seconds of the same stages: the work (distill, write) is on the CPU clock.
    assert set(out["stage_cpu_seconds"]) == set(out["stage_seconds"])
    assert all(v >= 0 for v in out["stage_cpu_seconds"].values())
    assert out["stage_cpu_seconds"]["distill"] > 0 and out["stage_cpu_seconds"]["write"] > 0
    (record,) = read_run_reports(store)
    assert record["stage_cpu_seconds"] == out["stage_cpu_seconds"]
    assert out["resolved"] == {}  # the in-process engine leaves nothing open
    assert record["run_id"] == out["run_id"] and record["status"] == "succeeded"
    assert record["engine"] == "in_process" and Path(out["report_path"]).is_file()
    for key in ("sessions_read", "skipped", "quarantined", "memories_written", "commits"):
        assert record["counts"][key] == out[key]
    assert record["config"]["commit_every"] == 3 and record["config"]["ray"] == {}

    again = backfill(BackfillConfig(archive, store, embedder=None))  # the Python API
    assert isinstance(again, BackfillReport)
    assert (again.skipped, again.memories_written, again.sessions_committed) == (4, 0, 0)


def test_job_flags_are_the_cli_flags() -> None:
    command = typer.main.get_command(app).commands["backfill"]
    cli_flags = {opt for p in command.params for opt in p.opts if opt.startswith("--")}
    job_flags = {
        opt
        for action in job_parser()._actions
        for opt in action.option_strings
        if opt not in ("-h", "--help")
    }
    assert job_flags == cli_flags - {"--help"}


def test_job_refuses_a_ray_flag_in_process(
    tmp_path: Path, archive: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mnemoray.jobs.backfill import main as job_main

    code = job_main(
        [
            "--archive",
            str(archive),
            "--store",
            str(tmp_path / "store"),
            "--in-process",
            "--embedder",
            "none",
            "--gpus-per-embedder",
            "1",
        ]
    )
    assert code == 2 and "--gpus-per-embedder" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()
