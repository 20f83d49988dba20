"""Consolidation of old memories: provenance, idempotency, expiry of originals, per-app
policy, crash healing, forgets that reach summaries, and the job / CLI that schedule it
(keyword-only store: no model)."""

from __future__ import annotations

import configparser
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mnemoray.cli.main import app as cli_app
from mnemoray.errors import InvalidInput
from mnemoray.jobs.consolidate import main as job_main
from mnemoray.jobs.consolidate import memory_prompts
from mnemoray.jobs.scheduled_backfill import schedule_lock
from mnemoray.memory.hygiene.attach import attach_hygiene
from mnemoray.memory.hygiene.cascade import SOURCE_FORGOTTEN
from mnemoray.memory.hygiene.consolidate import (
    CONSOLIDATED,
    ConsolidationPolicy,
    consolidate,
    plan_groups,
    summarize_group,
)
from mnemoray.memory.hygiene.ledger import CONSOLIDATED_KIND, ConsolidationLedger
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports
from mnemoray.settings.hygiene import hygiene_settings
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import DAY, T0, parrot, session

YEAR = 365 * DAY
# Summaries and facts of old sessions, one period for all: one consolidated summary.
POLICY = ConsolidationPolicy(period_s=YEAR, kinds=("session_summary", "fact"))


def old_sessions(user: str = "alice", app: str = "app") -> list:
    return [
        parrot(user=user, app=app),
        session(
            "cooking",
            T0 + 3 * DAY,
            ("u", "How long should I roast a whole chicken? I like crispy skin."),
            ("m", "Roast it at 220C for about 75 minutes."),
            ("u", "I usually cook dinner for four people on Sundays."),
            user=user,
            app=app,
        ),
        session(
            "running",
            T0 + 9 * DAY,
            ("u", "I'm training for a half marathon in October."),
            ("m", "Build up to 30-40 km per week with one long run."),
            ("u", "I run in the mornings before work."),
            user=user,
            app=app,
        ),
    ]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MemoryService]:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    for s in old_sessions():
        svc.add_session(s)
    yield svc
    svc.close()  # ends the hooks thread a test started


def kinds(svc: MemoryService, user: str = "alice", app: str = "app") -> dict[str, list]:
    out: dict[str, list] = {}
    for m in svc.snapshot().rows_for_user(app, user):
        out.setdefault(m.kind, []).append(m)
    return out


def test_old_memories_merge_into_a_summary_with_provenance(service: MemoryService) -> None:
    recent = session(
        "recent",
        T0 + 2 * YEAR,
        ("u", "I adopted a parrot named Kiwi."),
        ("m", "Congratulations on Kiwi!"),
    )
    service.add_session(recent)
    before = kinds(service)
    old_ids = {
        m.memory_id
        for k in ("session_summary", "fact")
        for m in before[k]
        if m.session_id != "recent"
    }
    report = consolidate(service, POLICY, now=T0 + 2 * YEAR + DAY)
    assert (report.groups, report.summaries_written) == (1, 1)
    assert report.originals_consolidated == len(old_ids)
    (summary,) = kinds(service)[CONSOLIDATED_KIND]
    assert set(summary.source_event_ids) == old_ids  # provenance: the merged memories
    assert summary.session_id.startswith("consolidated:")
    assert "parrot" in summary.text and "marathon" in summary.text
    assert summary.event_time_start is not None and summary.event_time_start >= T0
    assert summary.event_time_end is not None and summary.event_time_end < T0 + YEAR
    # Kept originals stay searchable, next to the summary; the recent session is untouched.
    results = service.search("app", "alice", "African Grey parrot", 10)
    assert CONSOLIDATED_KIND in {r.memory.kind for r in results}
    # A kept fact ranks (shown as itself, or as the chunk of its turn in its place).
    fact_ids = {m.memory_id for m in before["fact"]}
    assert any(r.memory.memory_id in fact_ids or r.in_place_of in fact_ids for r in results)
    after = kinds(service)
    assert len(after["fact"]) == len(before["fact"])
    recent_ids = {m.memory_id for ms in after.values() for m in ms if m.session_id == "recent"}
    assert recent_ids and not recent_ids & set(summary.source_event_ids)


def test_running_twice_consolidates_nothing_twice(service: MemoryService) -> None:
    first = consolidate(service, POLICY)
    assert first.groups == 1
    again = consolidate(service, POLICY)
    assert (again.groups, again.summaries_written, again.originals_consolidated) == (0, 0, 0)
    # Even once the summary is forgotten, its originals are not merged again.
    (summary,) = kinds(service)[CONSOLIDATED_KIND]
    assert service.forget_memory("app", "alice", summary.memory_id) == 1
    assert consolidate(service, POLICY).groups == 0
    assert CONSOLIDATED_KIND not in kinds(service)


def test_originals_expire_with_reason_consolidated(service: MemoryService) -> None:
    policy = ConsolidationPolicy(
        period_s=YEAR,
        kinds=("session_summary", "fact"),
        originals="expire",
        expire_after_s=10 * DAY,
    )
    now = T0 + YEAR
    report = consolidate(service, policy, now=now)
    merged = set(kinds(service)[CONSOLIDATED_KIND][0].source_event_ids)
    assert report.originals_expired == 0  # not due yet
    assert consolidate(service, policy, now=now + 5 * DAY).originals_expired == 0
    later = consolidate(service, policy, now=now + 11 * DAY)
    assert later.originals_expired == len(merged) and later.groups == 0
    left = kinds(service)
    assert "session_summary" not in left and "fact" not in left
    assert len(left[CONSOLIDATED_KIND]) == 1 and left["chunk"]  # chunks were not merged
    reasons = {t["reason"] for t in service.forgotten("app", "alice")}
    assert reasons == {CONSOLIDATED}
    assert consolidate(service, policy, now=now + 12 * DAY).originals_expired == 0


def test_expire_after_zero_forgets_in_the_same_run(service: MemoryService) -> None:
    policy = ConsolidationPolicy(
        period_s=YEAR, kinds=("fact",), originals="expire", expire_after_s=0
    )
    report = consolidate(service, policy)
    assert report.originals_expired == report.originals_consolidated > 0
    assert "fact" not in kinds(service)


def test_young_memories_and_small_groups_wait(service: MemoryService) -> None:
    young = ConsolidationPolicy(min_age_s=10 * YEAR, period_s=YEAR, kinds=("fact",))
    assert consolidate(service, young).groups == 0
    tiny = ConsolidationPolicy(period_s=DAY, kinds=("session_summary",), min_group=2)
    assert consolidate(service, tiny).groups == 0  # one summary per day: nothing to merge
    rows = service.snapshot().rows_for_user("app", "alice")
    groups = plan_groups(
        rows,
        ConsolidationPolicy(period_s=YEAR, min_group=2, max_group=4, kinds=("chunk", "fact")),
        set(),
        T0 + YEAR,
    )
    assert groups and all(2 <= len(g) <= 4 for g in groups)
    times = [m.event_time_end for g in groups for m in g]
    assert times == sorted(times)  # oldest first


def test_per_app_policy_and_app_filter(tmp_path: Path) -> None:
    svc = MemoryService(MemoryStore(tmp_path / "store"), None, ExtractiveSummarizer())
    for app in ("app", "quiet"):
        for s in old_sessions(app=app):
            svc.add_session(s)
    settings = hygiene_settings(
        {
            "consolidation": {"period_s": YEAR, "kinds": ["session_summary", "fact"]},
            "apps": {"quiet": {"consolidation": {"enabled": False}}},
        }
    )
    report = consolidate(
        svc, settings.consolidation_for(None), app_policies=settings.app_consolidation
    )
    assert report.groups == 1 and report.users == 1
    assert CONSOLIDATED_KIND not in kinds(svc, app="quiet")
    assert consolidate(svc, POLICY, apps=["other"]).users == 0


def test_a_run_stopped_before_the_ledger_is_healed(service: MemoryService) -> None:
    rows = service.snapshot().rows_for_user("app", "alice")
    (group,) = plan_groups(rows, POLICY, set(), T0 + YEAR)
    record = summarize_group(group, service.summarizer, T0 + YEAR)
    assert record is not None
    service.add_memories([record])  # ...and the process died before the ledger write
    report = consolidate(service, POLICY)
    assert report.groups == 0 and report.ledger_healed == len(group)
    ledger = ConsolidationLedger.of_store(service.store.root)
    assert ledger.db.conn().execute(
        "SELECT summary_id FROM consolidated WHERE app_name = 'app' AND user_id = 'alice' "
        "AND memory_id = ?",
        (group[0].memory_id,),
    ).fetchone() == (record.memory_id,)


def test_dry_run_writes_nothing(service: MemoryService) -> None:
    report = consolidate(service, POLICY, dry_run=True)
    assert report.dry_run and report.groups == 1 and report.planned[0]["memory_ids"]
    assert CONSOLIDATED_KIND not in kinds(service)
    assert consolidate(service, POLICY).groups == 1


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"min_group": 1}, "min_group"),
        ({"max_group": 2, "min_group": 3}, "max_group"),
        ({"kinds": ("consolidated_summary",)}, "kinds"),
        ({"period_s": 0}, "period_s"),
        ({"originals": "drop"}, "originals"),
    ],
)
def test_bad_policies_name_their_field(values: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        ConsolidationPolicy(**values)
    assert exc.value.field == field


def test_bad_settings_name_their_key() -> None:
    with pytest.raises(InvalidInput) as exc:
        hygiene_settings({"apps": {"bot": {"consolidation": {"min_group": 1}}}})
    assert exc.value.field == "hygiene.apps.bot.consolidation.min_group"


def _settings_file(tmp_path: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "hygiene": {
                    "consolidation": {"period_s": YEAR, "kinds": ["session_summary", "fact"]}
                },
                "models": {"summarizer": "extractive", "embedder": "none"},
            }
        )
    )
    return path


def test_the_job_consolidates_reports_and_is_idempotent(
    service: MemoryService, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = str(service.store.root)
    argv = ["--store", store, "--config", str(_settings_file(tmp_path)), "--json"]
    assert job_main(argv, out=io.StringIO()) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["groups"] == 1 and first["kind"] == "consolidation"
    assert job_main(argv, out=io.StringIO()) == 0
    assert json.loads(capsys.readouterr().out)["groups"] == 0
    runs = [r for r in read_run_reports(store) if r.get("kind") == "consolidation"]
    assert len(runs) == 2 and all(r["status"] == "succeeded" for r in runs)
    service.reloader.refresh()
    assert len(kinds(service)[CONSOLIDATED_KIND]) == 1
    err = io.StringIO()
    assert job_main(["--store", str(tmp_path / "nowhere")], out=err) == 2
    assert "no memory store" in err.getvalue()


def test_the_cli_command(service: MemoryService, tmp_path: Path) -> None:
    store = str(service.store.root)
    runner = CliRunner()
    dry = runner.invoke(
        cli_app,
        [
            "memory",
            "consolidate",
            "--store",
            store,
            "--config",
            str(_settings_file(tmp_path)),
            "--dry-run",
        ],
    )
    assert dry.exit_code == 0, dry.output
    assert "app/alice: would merge" in dry.output
    done = runner.invoke(
        cli_app,
        [
            "memory",
            "consolidate",
            "--store",
            store,
            "--config",
            str(_settings_file(tmp_path)),
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout.strip().splitlines()[-1])["summaries_written"] == 1


def test_a_run_while_another_holds_the_lock_does_nothing(service: MemoryService) -> None:
    store = service.store.root
    err = io.StringIO()
    with schedule_lock(store / "schedule" / "consolidate.lock"):
        assert job_main(["--store", str(store)], out=err) == 0
    assert "another consolidation holds" in err.getvalue()
    assert CONSOLIDATED_KIND not in kinds(service)


def test_forgetting_an_original_reaches_its_summary(service: MemoryService) -> None:
    hygiene = attach_hygiene(service, hygiene_settings({}))
    try:
        consolidate(service, POLICY)
        (summary,) = kinds(service)[CONSOLIDATED_KIND]
        wrong = next(m for m in kinds(service)["fact"] if "marathon" in m.text)
        assert service.forget_memory("app", "alice", wrong.memory_id, reason="user asked") == 1
        assert hygiene.drain()
        assert CONSOLIDATED_KIND not in kinds(service)
        gone = {t["memory_id"]: t["reason"] for t in service.forgotten("app", "alice")}
        assert gone[summary.memory_id] == SOURCE_FORGOTTEN
        assert service.stats()["summaries_cascaded"] == 1
        # Released: the next run merges the other originals again, without the forgotten one.
        again = consolidate(service, POLICY)
        assert again.groups == 1
        (fresh,) = kinds(service)[CONSOLIDATED_KIND]
        assert set(fresh.source_event_ids) == set(summary.source_event_ids) - {wrong.memory_id}
        # An edit replaces wrong words: the summary that repeats them goes too.
        parrot_fact = next(m for m in kinds(service)["fact"] if "African Grey" in m.text)
        edited = service.edit_memory(
            "app", "alice", parrot_fact.memory_id, "I really like Senegal parrots.", actor="ana"
        )
        assert hygiene.drain()
        assert CONSOLIDATED_KIND not in kinds(service)
        assert consolidate(service, POLICY).groups == 1
        (third,) = kinds(service)[CONSOLIDATED_KIND]
        assert edited.memory_id in third.source_event_ids and "Senegal" in third.text
    finally:
        hygiene.stop()


def test_housekeeping_forgets_keep_the_summary(service: MemoryService) -> None:
    hygiene = attach_hygiene(service, hygiene_settings({}))
    try:
        policy = ConsolidationPolicy(
            period_s=YEAR, kinds=("session_summary", "fact"), originals="expire", expire_after_s=0
        )
        report = consolidate(service, policy)
        assert report.originals_expired > 0
        assert hygiene.drain()
        assert len(kinds(service)[CONSOLIDATED_KIND]) == 1  # expiry is no user's forget
    finally:
        hygiene.stop()


def test_the_schedules_run_the_job() -> None:
    root = Path(__file__).resolve().parents[3]
    service = configparser.ConfigParser(strict=False, interpolation=None)
    service.optionxform = str  # type: ignore[assignment,method-assign]
    service.read_string((root / "deploy/systemd/mnemoray-consolidate.service").read_text())
    start = service["Service"]["ExecStart"].replace("\\\n", " ").split()
    assert start[1:3] == ["-m", "mnemoray.jobs.consolidate"] and "--store" in start
    timer = configparser.ConfigParser(strict=False, interpolation=None)
    timer.read_string((root / "deploy/systemd/mnemoray-consolidate.timer").read_text())
    assert timer["Timer"]["Unit"] == "mnemoray-consolidate.service"
    docs = list(yaml.safe_load_all((root / "deploy/k8s/consolidate-cron.yaml").read_text()))
    (cron,) = [d for d in docs if d and d["kind"] == "CronJob"]
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["command"][:3] == ["python", "-m", "mnemoray.jobs.consolidate"]
    (config,) = [d for d in docs if d and d["kind"] == "ConfigMap"]
    settings = yaml.safe_load(config["data"]["settings.yaml"])
    assert hygiene_settings(settings["hygiene"]).consolidation_for("any").enabled


class PromptRecorder(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str | None] = []

    def with_prompt(self, prompt: str | None) -> PromptRecorder:
        self.prompts.append(prompt)
        return self


def test_the_apps_memory_prompt_instructs_the_summarizer(service: MemoryService) -> None:
    service.memory_prompt = lambda app: "Merge into a user profile." if app == "app" else None
    recorder = PromptRecorder()
    assert consolidate(service, POLICY, summarizer=recorder).groups == 1
    assert recorder.prompts == ["Merge into a user profile."]
    prompts = memory_prompts(
        {"memory_prompt": "default words", "apps": {"bot": {"memory_prompt": "bot words"}}}
    )
    assert (prompts("bot"), prompts("other")) == ("bot words", "default words")


# -- a forget is never outrun by a consolidation, nor lost ----------------------------
def test_an_original_forgotten_while_its_group_is_summarized_never_stays_merged(
    service: MemoryService,
) -> None:
    hygiene = attach_hygiene(service, hygiene_settings({}))
    victim = next(m for m in kinds(service)["fact"] if "parrot" in m.text.lower())

    class Racing(ExtractiveSummarizer):  # the forget lands while the job summarizes
        def summarize(self, events):
            if service.snapshot().get(victim.memory_id, ("app", "alice")) is not None:
                service.forget_memory("app", "alice", victim.memory_id, reason="user asked")
            return super().summarize(events)

    try:
        report = consolidate(service, POLICY, summarizer=Racing())
        assert report.summaries_dropped == 1 and CONSOLIDATED_KIND not in kinds(service)
        # Not ledgered as merged: the next run merges the rest, without the forgotten one.
        assert consolidate(service, POLICY).groups == 1
        (summary,) = kinds(service)[CONSOLIDATED_KIND]
        assert victim.memory_id not in summary.source_event_ids
    finally:
        hygiene.stop()


@pytest.mark.parametrize("scope", ["memory", "session"])
def test_a_run_catches_up_on_forgets_no_cascade_saw(
    service: MemoryService, tmp_path: Path, scope: str
) -> None:
    consolidate(service, POLICY)
    (summary,) = kinds(service)[CONSOLIDATED_KIND]
    wrong = next(m for m in kinds(service)["fact"] if "marathon" in m.text)
    # Another process without the cascade (no hygiene attached) forgets an original.
    other = MemoryService(MemoryStore(service.store.root), None, ExtractiveSummarizer())
    if scope == "memory":
        other.forget_memory("app", "alice", wrong.memory_id, reason="user asked")
    else:
        other.forget_session("app", "alice", wrong.session_id, reason="user asked")
    other.close()
    service.reloader.refresh()
    assert [m.memory_id for m in kinds(service)[CONSOLIDATED_KIND]] == [summary.memory_id]
    report = consolidate(service, POLICY)
    assert report.summaries_dropped == 1
    assert all(
        wrong.memory_id not in m.source_event_ids for m in kinds(service).get(CONSOLIDATED_KIND, [])
    )
    gone = {t["memory_id"]: t["reason"] for t in service.forgotten("app", "alice")}
    assert gone[summary.memory_id] == SOURCE_FORGOTTEN


def test_housekeeping_forgets_are_not_caught_up(service: MemoryService) -> None:
    consolidate(service, POLICY)
    (summary,) = kinds(service)[CONSOLIDATED_KIND]
    wrong = next(m for m in kinds(service)["fact"] if "marathon" in m.text)
    service.forget_memory("app", "alice", wrong.memory_id, reason="limit", actor="eviction")
    assert consolidate(service, POLICY).summaries_dropped == 0
    assert [m.memory_id for m in kinds(service)[CONSOLIDATED_KIND]] == [summary.memory_id]


def test_cli_forgets_reach_summaries(service: MemoryService) -> None:
    consolidate(service, POLICY)
    (summary,) = kinds(service)[CONSOLIDATED_KIND]
    wrong = next(m for m in kinds(service)["fact"] if "marathon" in m.text)
    out = CliRunner().invoke(
        cli_app,
        [
            "memory",
            "forget",
            "--store",
            str(service.store.root),
            "--app",
            "app",
            "--user",
            "alice",
            "--id",
            wrong.memory_id,
            "--reason",
            "asked",
        ],
    )
    assert out.exit_code == 0, out.output
    service.reloader.refresh()
    assert CONSOLIDATED_KIND not in kinds(service)
    gone = {t["memory_id"]: t["reason"] for t in service.forgotten("app", "alice")}
    assert gone[summary.memory_id] == SOURCE_FORGOTTEN
