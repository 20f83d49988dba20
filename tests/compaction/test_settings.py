"""Compaction settings and prompts: per-app policies in the serve settings (errors name
the key), and compaction / memory prompts per app reaching the summarizer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mnemoray.compaction.compactor import CompactionConfig
from mnemoray.compaction.policy import create_session
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.summarizers import Summarizer, Summary
from tests.support.compaction_helpers import compactions, poll, turns


class Prompted(Summarizer):
    """Records the prompt each summary was asked with (``with_prompt`` makes a copy)."""

    name = "prompted"

    def __init__(self, log: list[str | None], prompt: str | None = None) -> None:
        self.log, self.prompt = log, prompt

    def with_prompt(self, prompt: str | None) -> Summarizer:
        return Prompted(self.log, prompt)

    def summarize(self, events: Sequence[Event]) -> Summary:
        self.log.append(self.prompt)
        return Summary(summary="The user keeps basil on the balcony.")


def test_compaction_and_memory_prompts_are_configured_per_app(tmp_path) -> None:
    from mnemoray.http.compaction import start_auto_compaction
    from mnemoray.http.metrics import Metrics
    from mnemoray.memory.service.service import MemoryService
    from mnemoray.settings.serve import parse_settings
    from mnemoray.summarizers.llm_prompt import DEFAULT_PROMPT, build_messages

    settings = parse_settings(
        {
            "store": str(tmp_path / "store"),
            "compaction": {
                "compaction_prompt": "Compact this chat.",
                "apps": {
                    "bot": {
                        "interval": 1,
                        "compaction_prompt": "Compact for the bot.",
                        "memory_prompt": "Remember for the bot.",
                    }
                },
            },
        }
    ).compaction
    store, log = InMemorySessionStore(), []
    auto = start_auto_compaction(settings, store, Prompted(log), Metrics(lambda: {}))
    assert auto is not None
    try:
        for app in ("bot", "web"):
            policy = {"interval": 1, "keep_last": 1}
            session = create_session(store, app, "ana", "s", compaction=policy)
            store.append_events(session, turns(2))
            assert poll(lambda s=session: compactions(store, s)) and auto.wait_idle(5)
    finally:
        auto.stop()
    assert log == ["Compact for the bot.", "Compact this chat."]
    # Memory ingestion: the app's memory prompt, else the summarizer's own.
    service = MemoryService.open(tmp_path / "store", embedder=None, summarizer=Prompted(log))
    service.memory_prompt = settings.memory_prompt_for
    log.clear()
    for app in ("bot", "web"):
        session = Session(app, "ana", "m")
        for e in turns(1):
            session.apply(e)
        service.add_session(session)
    assert set(log) == {"Remember for the bot.", None} and log[0] == "Remember for the bot."
    # LLM backends put the prompt in place of the default task line; the format stays.
    text = build_messages(turns(1), prompt="Remember for the bot.")[0]["content"]
    assert text.startswith("Remember for the bot.") and DEFAULT_PROMPT not in text
    assert '"key_facts"' in text
    assert build_messages(turns(1))[0]["content"].startswith(DEFAULT_PROMPT)
    from mnemoray.summarizers.llm_base import ReplaySummarizer

    base = ReplaySummarizer([])
    steered = base.with_prompt("Compact for the bot.")
    assert steered.prompt == "Compact for the bot." and base.prompt is None
    assert base.with_prompt(None) is base


@pytest.mark.parametrize(
    "group,field",
    [
        ({"keep_last": -1}, "compaction.keep_last"),
        ({"boundaries": ["sunset"]}, "compaction.boundaries.0"),
        ({"apps": {"bot": {"overlap": None}}}, "compaction.apps.bot.overlap"),
        ({"apps": {"bot": {"intervall": 3}}}, "compaction.apps.bot.intervall"),
    ],
)
def test_a_bad_compaction_setting_names_its_key(tmp_path, group: dict, field: str) -> None:
    from mnemoray.settings.serve import SettingsError, parse_settings

    with pytest.raises(SettingsError) as err:
        parse_settings({"store": str(tmp_path), "compaction": group})
    assert err.value.field == field


def test_app_policies_merge_over_the_default(tmp_path) -> None:
    from mnemoray.settings.serve import load_settings

    settings = load_settings(
        {
            "store": str(tmp_path),
            "compaction.interval": "4",
            "compaction.apps.bot.token_threshold": None,
        },
        env={"MNEMORAY_COMPACTION__APPS__BOT__BOUNDARIES": '["phrase"]'},
    ).compaction
    assert settings.policy_for("bot") == CompactionConfig(
        interval=4, token_threshold=None, boundaries=("phrase",)
    )
    assert settings.policy_for("other") == CompactionConfig(interval=4, token_threshold=8000)
