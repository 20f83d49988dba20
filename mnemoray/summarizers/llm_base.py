"""Glue shared by LLM backends: window -> completion -> parsed Summary (or fallback)."""

from __future__ import annotations

import copy
import logging
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Summarizer, Summary
from mnemoray.summarizers.errors import SummaryParseError
from mnemoray.summarizers.llm_prompt import parse_summary

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    text: str
    truncated: bool = False  # generation stopped at the token limit, not at end-of-sequence


class LLMSummarizer(Summarizer):
    """Base for model-backed summarizers; subclasses only implement ``_complete``.

    ``fallback``: another Summarizer (e.g. the extractive one) used for a
    window whose model output cannot be parsed, instead of raising
    ``SummaryParseError``. Transport and configuration errors are never
    masked by the fallback: they mean the backend itself is broken.
    """

    limit_option = "max_tokens"  # the attribute holding the generation limit, for error hints
    prompt: str | None = None  # the task line of the instructions (None: DEFAULT_PROMPT)

    def __init__(self, fallback: Summarizer | None = None) -> None:
        if fallback is not None and not isinstance(fallback, Summarizer):
            raise TypeError(f"fallback: expected a Summarizer, got {type(fallback).__name__}")
        self.fallback = fallback

    def with_prompt(self, prompt: str | None) -> LLMSummarizer:
        """A copy that instructs the model with ``prompt`` (same model and client)."""
        if prompt == self.prompt:
            return self
        clone = copy.copy(self)
        clone.prompt = prompt
        return clone

    @abstractmethod
    def _complete(self, batches: Sequence[Sequence[Event]]) -> list[Completion]:
        """One completion per window, in order."""

    def summarize(self, events: Sequence[Event]) -> Summary:
        return self.summarize_many([events])[0]

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        if not batches:
            return []
        completions = self._complete(batches)
        if len(completions) != len(batches):
            raise RuntimeError(
                f"{self.name}: got {len(completions)} completions for {len(batches)} windows"
            )
        return [self._finish(c, events) for c, events in zip(completions, batches, strict=True)]

    def _finish(self, completion: Completion, events: Sequence[Event]) -> Summary:
        try:
            return parse_summary(completion.text, events)
        except SummaryParseError as exc:
            if self.fallback is not None:
                log.warning(
                    "%s output unparseable, using fallback %s: %s",
                    self.name,
                    self.fallback.name,
                    exc,
                )
                return self.fallback.summarize(events)
            if completion.truncated and "{" in completion.text:  # JSON began but was cut off
                limit = f"{self.limit_option}={getattr(self, self.limit_option, '?')}"
                raise SummaryParseError(
                    f"{self.name}: generation stopped at {limit} before "
                    f"the JSON was complete, raise it; {exc}"
                ) from exc
            raise SummaryParseError(f"{self.name}: {exc}") from exc


class ReplaySummarizer(LLMSummarizer):
    """An LLM backend whose completions were generated elsewhere, in order.

    A batch engine (vLLM through ``ray.data.llm``) produces the raw text of a
    session's summary; replaying it here runs the very parse, citation mapping
    and ``fallback`` of the in-process backend, so both give the same Summary.
    ``name`` is the backend the text came from (recorded in the store manifest).
    """

    def __init__(
        self,
        completions: Sequence[Completion],
        name: str = "vllm",
        max_tokens: int | None = None,
        fallback: Summarizer | None = None,
    ) -> None:
        super().__init__(fallback)
        self.name = name
        self.max_tokens = max_tokens
        self._pending = list(completions)

    def _complete(self, batches: Sequence[Sequence[Event]]) -> list[Completion]:
        if len(batches) > len(self._pending):
            raise RuntimeError(
                f"{self.name}: {len(batches)} windows to summarize but only "
                f"{len(self._pending)} precomputed completions"
            )
        out, self._pending = self._pending[: len(batches)], self._pending[len(batches) :]
        return out
