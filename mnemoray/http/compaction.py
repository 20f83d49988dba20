"""Automatic compaction in a replica: the core AutoCompactor, wired to the settings.

The summarizer is the one memory ingestion uses (``models.summarizer``, in-process
or the Summarizer deployment), with the app's ``compaction_prompt`` when one is
set; ``topic_shift`` embeds with the write embedder (none: the lexical stand-in).
Landed compactions and failures feed ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemoray.compaction.auto import AutoCompactor, CompactionDone
from mnemoray.http.metrics import Metrics
from mnemoray.sessions.store import SessionStore
from mnemoray.settings.compaction import CompactionSettings
from mnemoray.summarizers.base import Summarizer


def start_auto_compaction(
    settings: CompactionSettings,
    sessions: SessionStore,
    summarizer: Summarizer,
    metrics: Metrics,
    encode: Callable[[list[str]], Any] | None = None,
) -> AutoCompactor | None:
    """An AutoCompactor attached to ``sessions`` (None when ``enabled`` is off)."""
    if not settings.enabled:
        return None
    prompted: dict[str, Summarizer] = {}

    def summarizer_for(app_name: str) -> Summarizer:
        prompt = settings.compaction_prompt_for(app_name)
        if prompt is None:
            return summarizer
        if prompt not in prompted:
            prompted[prompt] = summarizer.with_prompt(prompt)
        return prompted[prompt]

    def on_compacted(done: CompactionDone) -> None:
        metrics.count_compaction(done.trigger, done.seconds, done.compression_ratio)

    def on_error(exc: BaseException, key: tuple[str, str, str]) -> None:
        metrics.compaction_errors.labels(type(exc).__name__).inc()

    return AutoCompactor(
        summarizer,
        summarizer_for=summarizer_for,
        policy_for=settings.policy_for,
        encode=encode,
        on_compacted=on_compacted,
        on_error=on_error,
        workers=settings.workers,
    ).attach(sessions)
