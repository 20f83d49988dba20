"""Summarizer backends behind one interface, looked up by name.

Backends register a factory so heavy ones (model weights, HTTP clients) are
imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemoray.errors import InvalidInput
from mnemoray.summarizers.base import Fact, Summarizer, Summary
from mnemoray.summarizers.extractive import ExtractiveSummarizer

SummarizerFactory = Callable[..., Summarizer]


def _transformers(**options: Any) -> Summarizer:
    from mnemoray.summarizers.transformers_backend import TransformersSummarizer

    return TransformersSummarizer(**options)  # model_path=... (a local seq2seq or causal LM)


def _openai(**options: Any) -> Summarizer:
    from mnemoray.summarizers.openai_backend import OpenAISummarizer

    return OpenAISummarizer(**options)  # base_url=..., model=... (e.g. a vLLM server)


def _vllm(**options: Any) -> Summarizer:
    from mnemoray.summarizers.vllm_backend import VLLMSummarizer

    return VLLMSummarizer(**options)  # model=...; the rest go to vllm.LLM


_REGISTRY: dict[str, SummarizerFactory] = {
    "extractive": ExtractiveSummarizer,
    "transformers": _transformers,
    "openai": _openai,
    "vllm": _vllm,
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
        raise InvalidInput(f"unknown summarizer {name!r}; known: "
                           f"{', '.join(available_summarizers())}")
    fallback = options.get("fallback")
    if isinstance(fallback, str):  # e.g. --summarizer-option fallback=extractive
        options["fallback"] = get_summarizer(fallback)
    return factory(**options)


__all__ = ["ExtractiveSummarizer", "Fact", "Summarizer", "Summary", "available_summarizers",
           "get_summarizer", "register_summarizer"]
