"""Summarization can be switched off: raw chunks only, the
summarizer never called, through distill_session, the service (per app, as Serve sets
it), and the backfill (CLI ``--no-summarize``, in process)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mnemoray.backfill import BackfillConfig
from mnemoray.backfill.steps import SessionItem
from mnemoray.cli.main import app
from mnemoray.errors import InvalidInput
from mnemoray.jobs.backfill import parse
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.ops.stats import store_stats
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.writes import session_content_hash
from mnemoray.pipeline.distill import Distill
from mnemoray.pipeline.rows import pack, unpack
from mnemoray.sessions.events import Event, model_message, user_message
from mnemoray.sessions.session import Session
from mnemoray.settings.serve import ServeSettings
from mnemoray.summarizers import ExtractiveSummarizer, Summary

ROOT = Path(__file__).resolve().parents[3]
ARCHIVE = ROOT / "examples" / "archive.jsonl"
T = 1_767_484_800.0


class RefusingSummarizer(ExtractiveSummarizer):
    """A summarizer that fails the test if anyone asks it for a summary."""

    name = "refusing"

    def summarize(self, events: Sequence[Event]) -> Summary:
        raise AssertionError("the summarizer was called with summarization off")


def session(app_name: str = "app", session_id: str = "s1") -> Session:
    s = Session(app_name, "maya", session_id, created_at=T)
    texts = [
        "I'm thinking about a pet parrot.",
        "Parrots need a large cage.",
        "I like African Greys. My flat is small.",
        "Then consider a budgie.",
        "I moved to Madrid in March.",
        "Noted.",
    ]
    for i, text in enumerate(texts):
        make = user_message if i % 2 == 0 else model_message
        args = (text,) if i % 2 == 0 else ("agent", text)
        s.apply(
            make(*args, id=f"e{i}", timestamp=T + i, invocation_id=f"i{i // 2}").with_session(
                session_id
            )
        )
    # A compaction already in the session: a summary too, so not stored either.
    s.apply(
        Event(
            author="adk",
            role="model",
            type="compaction",
            text="Parrot talk.",
            data={"start_ts": T, "end_ts": T + 3, "summary": "Parrot talk."},
            id="k1",
            timestamp=T + 10,
        ).with_session(session_id)
    )
    return s


def kinds(records) -> list[str]:
    return sorted({r.kind for r in records})


def test_distill_without_summarization_keeps_only_raw_chunks() -> None:
    records = distill_session(
        session(), RefusingSummarizer(), chunk_turns=4, summarize=False, now=T
    )
    assert kinds(records) == ["chunk"]
    # Windows of 4 turns, each turn in one window.
    assert [r.source_event_ids for r in records] == [
        ("e0", "e1", "e2", "e3"),
        ("e4", "e5"),
    ]
    assert not any(
        label in r.key_text
        for r in records  # no summary terms folded in
        for label in ("Facts:", "Topics:", "Entities:")
    )
    # The same chunks as with summarization on: only the summaries are left out.
    full = distill_session(session(), ExtractiveSummarizer(), chunk_turns=4, now=T)
    assert {"session_summary", "compaction_summary", "chunk"} <= set(kinds(full))
    assert [r.text for r in full if r.kind == "chunk"] == [r.text for r in records]
    # No summarizer at all is fine when none is needed, not when one is.
    assert distill_session(session(), None, summarize=False, now=T) == records
    with pytest.raises(TypeError, match="summarizer"):
        distill_session(session(), None, now=T)


def test_service_without_summarization_stores_chunks_only(tmp_path: Path) -> None:
    service = MemoryService.open(
        tmp_path / "store", embedder=None, summarizer=RefusingSummarizer(), summarize=False
    )
    added = service.add_session(session())
    assert kinds(added) == ["chunk"]
    hits = service.search("app", "maya", "Madrid", 5)
    assert hits and all(h.memory.kind == "chunk" for h in hits)


def test_summarization_per_app_as_serve_configures_it(tmp_path: Path) -> None:
    settings = ServeSettings.model_validate(
        {"store": str(tmp_path / "store"), "ingestion": {"apps": {"raw_app": {"summarize": False}}}}
    )
    assert settings.ingestion.summarize_for("raw_app") is False
    assert settings.ingestion.summarize_for("other") is True
    service = MemoryService.open(tmp_path / "store", embedder=None)
    service.summarize_for = settings.ingestion.summarize_for  # what the ingress does
    assert kinds(service.add_session(session("raw_app"))) == ["chunk"]
    assert "session_summary" in kinds(service.add_session(session("other")))
    off = ServeSettings.model_validate(
        {
            "store": str(tmp_path / "s2"),
            "ingestion": {"summarize": False, "apps": {"x": {"summarize": True}}},
        }
    )
    assert (off.ingestion.summarize_for("x"), off.ingestion.summarize_for("y")) == (True, False)
    with pytest.raises(ValueError, match="ingestion.apps.x.summarise"):
        ServeSettings.model_validate(
            {"store": "s", "ingestion": {"apps": {"x": {"summarise": False}}}}
        )


def test_backfill_in_process_with_no_summarize(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = CliRunner().invoke(
        app,
        [
            "backfill",
            "--archive",
            str(ARCHIVE),
            "--store",
            str(store),
            "--in-process",
            "--embedder",
            "none",
            "--no-summarize",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    stats = store_stats(MemoryStore(store))
    assert stats["memories"] > 0 and list(stats["kinds"]) == ["chunk"]
    assert stats["summarizer"] is None  # none ran


def test_no_summarize_with_a_summarizer_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "backfill",
            "--archive",
            str(ARCHIVE),
            "--store",
            str(tmp_path / "store"),
            "--in-process",
            "--no-summarize",
            "--summarizer",
            "openai",
        ],
    )
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --no-summarize: ")
    assert not (tmp_path / "store" / "manifest.json").exists()


def test_both_engines_read_no_summarize_from_the_one_config() -> None:
    config, engine, _ = parse(["--archive", str(ARCHIVE), "--store", "s", "--no-summarize"])
    assert config.summarize is False and engine == "ray_data"
    assert config.public()["summarize"] is False  # recorded in the run report
    assert parse(["--archive", "a", "--store", "s"])[0].summarize is True
    with pytest.raises(InvalidInput) as err:
        BackfillConfig(archive="a", store="s", summarize="no").check()  # type: ignore[arg-type]
    assert err.value.field == "summarize"


def test_the_ray_engines_distill_step_keeps_raw_chunks_and_builds_no_summarizer(
    tmp_path: Path,
) -> None:
    s = session()
    step = Distill(str(tmp_path / "store"), 2, "openai", summarize=False)  # openai: unbuilt
    assert step.summarizer is None
    (item,), stats, _ = unpack(
        step(pack([SessionItem("x.jsonl:0", session_content_hash(s), s, s.to_dict())]))
    )
    assert kinds(item.memories) == ["chunk"]
    assert stats[-1].get("summarizer") is None and stats[-1]["quarantined"] == 0
