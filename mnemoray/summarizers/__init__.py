"""Summarizer backends behind one interface, looked up by name.

Backends register a factory so heavy ones (model weights, HTTP clients) are
imported only when asked for.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.summarizers.base import Fact, Summarizer, Summary
from mnemoray.summarizers.extractive import ExtractiveSummarizer

SummarizerFactory = Callable[..., Summarizer]


def _lazy(module: str, name: str) -> SummarizerFactory:
    """A factory that imports its backend class only when called; ``target`` names
    the class, so its options can be checked without building it."""

    def target() -> Callable[..., Summarizer]:
        return getattr(importlib.import_module(module), name)

    def factory(**options: Any) -> Summarizer:
        return target()(**options)

    factory.target = target  # type: ignore[attr-defined]
    return factory


_REGISTRY: dict[str, SummarizerFactory] = {
    "extractive": ExtractiveSummarizer,
    # model_path=... (a local seq2seq or causal LM)
    "transformers": _lazy("mnemoray.summarizers.transformers_local", "TransformersSummarizer"),
    # base_url=..., model=... (an OpenAI-compatible server, e.g. vLLM)
    "openai": _lazy("mnemoray.summarizers.openai_compat", "OpenAISummarizer"),
    # model=...; the rest go to vllm.LLM
    "vllm": _lazy("mnemoray.summarizers.vllm_engine", "VLLMSummarizer"),
}


def register_summarizer(name: str, factory: SummarizerFactory) -> None:
    """Make ``get_summarizer(name, **options)`` call ``factory(**options)``."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"summarizer name: must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"summarizer {name!r}: factory must be callable")
    _REGISTRY[name] = factory


def available_summarizers() -> list[str]:
    return sorted(_REGISTRY)


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """A configured summarizer; an unknown name is an error listing the known ones."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise InvalidInput(
            f"unknown summarizer {name!r}; known: {', '.join(available_summarizers())}"
        )
    check_options(name, options)
    fallback = options.get("fallback")
    if isinstance(fallback, str):  # e.g. --summarizer-option fallback=extractive
        options["fallback"] = get_summarizer(fallback)
    return factory(**options)


def check_options(name: str, options: dict[str, Any]) -> None:
    """Raise ``InvalidInput`` (field ``summarizer_options``) naming the options the
    summarizer ``name`` needs but did not get, or does not know, before it is built
    (a batch job checks this before any work)."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise InvalidInput(
            f"unknown {name!r}; known: {', '.join(available_summarizers())}", field="summarizer"
        )
    target = getattr(factory, "target", None)
    try:
        params = inspect.signature(target() if target else factory).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature: nothing to check
        return
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    missing = [p.name for p in named if p.default is p.empty and p.name not in options]
    if missing:
        raise InvalidInput(
            f"summarizer {name!r} needs {', '.join(missing)} (give each as KEY=VALUE)",
            field="summarizer_options",
        )
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        known = {p.name for p in named}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InvalidInput(
                f"summarizer {name!r} has no option {unknown[0]!r}; known: "
                f"{', '.join(sorted(known))}",
                field="summarizer_options",
            )


__all__ = [
    "ExtractiveSummarizer",
    "Fact",
    "Summarizer",
    "Summary",
    "available_summarizers",
    "check_options",
    "get_summarizer",
    "register_summarizer",
]
