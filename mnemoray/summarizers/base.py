"""The one Summarizer interface, shared by compaction and memory ingestion."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mnemoray.sessions.events import Event


@dataclass(frozen=True)
class Fact:
    """A statement derived from specific events (provenance kept)."""

    text: str
    source_event_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    summary: str
    topics: tuple[str, ...] = ()
    key_facts: tuple[Fact, ...] = ()
    entities: tuple[str, ...] = ()
    open_threads: tuple[str, ...] = ()
    source_event_ids: tuple[str, ...] = ()
    # Typed outcomes where a summarizer yields them: what was decided, and
    # what someone committed to do. Kept on the memory records (``distill``).
    decisions: tuple[str, ...] = ()
    commitments: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Summary:
        return cls(
            summary=str(raw.get("summary", "")),
            topics=tuple(raw.get("topics") or ()),
            key_facts=tuple(
                Fact(f["text"], tuple(f.get("source_event_ids") or ()))
                for f in raw.get("key_facts") or ()
            ),
            entities=tuple(raw.get("entities") or ()),
            open_threads=tuple(raw.get("open_threads") or ()),
            source_event_ids=tuple(raw.get("source_event_ids") or ()),
            decisions=tuple(raw.get("decisions") or ()),
            commitments=tuple(raw.get("commitments") or ()),
        )


class Summarizer(ABC):
    """``summarize(events) -> Summary``; every fact names its source events."""

    name: str = "base"

    @abstractmethod
    def summarize(self, events: Sequence[Event]) -> Summary: ...

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        """Batch entry point (Ray Data); backends with real batching override it."""
        return [self.summarize(events) for events in batches]

    def with_prompt(self, prompt: str | None) -> Summarizer:
        """This summarizer instructed by ``prompt`` (an app's ``compaction_prompt`` /
        ``memory_prompt``). Backends without a prompt (extractive) return themselves."""
        return self
