"""MemoryService is composed of parts (lifecycle, graph reads, profile reads), not mixed
from them: each public method of a part is the service's own, by the same name and
signature, and a part reads the service at call time."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.graph_reads import GraphReads
from mnemoray.memory.service.lifecycle import MemoryLifecycle
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.profiles.reads import ProfileReads
from mnemoray.summarizers.extractive import ExtractiveSummarizer

PARTS = [(MemoryLifecycle, "lifecycle"), (GraphReads, "graph_reads"), (ProfileReads, "profiles")]


def _public(cls: type) -> list[str]:
    return [
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


def test_the_service_has_no_base_but_object() -> None:
    assert MemoryService.__mro__ == (MemoryService, object)


@pytest.mark.parametrize(("part", "attr"), PARTS)
def test_every_public_method_of_a_part_is_the_services_by_name_and_signature(
    part: type, attr: str
) -> None:
    names = _public(part)
    assert names
    for name in names:
        assert name in vars(MemoryService), name
        ours = inspect.signature(getattr(MemoryService, name))
        theirs = inspect.signature(getattr(part, name))
        assert str(ours) == str(theirs), name


def test_parts_read_the_service_at_call_time(tmp_path: Path) -> None:
    service = MemoryService(MemoryStore(tmp_path / "s"), None, ExtractiveSummarizer())
    for _, attr in PARTS:
        assert getattr(service, attr).service is service
    forgot: list[tuple[str, ...]] = []

    class Counting(MemoryService):
        def forget_memories(
            self, app_name: str, user_id: str, memory_ids: Sequence[str], **kwargs: Any
        ) -> int:
            forgot.append((app_name, user_id))
            return super().forget_memories(app_name, user_id, memory_ids, **kwargs)

    counting = Counting(MemoryStore(tmp_path / "c"), None, ExtractiveSummarizer())
    (m,) = counting.add_memories(
        [Memory("app", "ana", "online", "fact", "Ana likes tulips", created_at=1.0)]
    )
    # forget_memory goes through the service's forget_memories (a subclass's override holds).
    assert counting.forget_memory("app", "ana", m.memory_id) == 1
    assert forgot == [("app", "ana")]
    service.close()
    counting.close()
