"""Memory.with_derived: a copy with the embedding, shard or session version set, equal to
what ``dataclasses.replace`` builds, and refusing anything else."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mnemoray.memory.records.record import DERIVED_FIELDS, Memory, MemoryRecordError


def _record() -> Memory:
    return Memory(
        "app",
        "u1",
        "s1",
        "fact",
        "I moved to Lisbon in May.",
        source_event_ids=("e1", "e2"),
        topics=("move",),
        key_facts=("Lisbon",),
        event_time_start=1.7e9,
        created_at=1.72e9,
        agent_name="planner",
    )


def _fields(m: Memory) -> dict[str, object]:
    return {k: v for k, v in m.__dict__.items() if k != "embedding"}


@pytest.mark.parametrize(
    "values",
    [
        {"shard": 3},
        {"session_events": 12, "session_updated_at": 1.71e9},
        {"embedding": np.ones(4, dtype=np.float32)},
        {"embedding": None},
    ],
)
def test_equals_replace(values: dict[str, object]) -> None:
    m = _record()
    got, want = m.with_derived(**values), replace(m, **values)
    assert _fields(got) == _fields(want)
    assert (got.embedding is None) == (want.embedding is None)
    assert got.memory_id == m.memory_id and got.content_hash == m.content_hash
    assert _fields(m) == _fields(_record())  # the original is untouched


def test_with_embedding_is_float32() -> None:
    got = _record().with_embedding(np.arange(3, dtype=np.float64))
    assert got.embedding is not None and got.embedding.dtype == np.float32


def test_refuses_fields_that_carry_text_or_identity() -> None:
    m = _record()
    for name in ("text", "memory_id", "agent_name", "content_hash"):
        assert name not in DERIVED_FIELDS
        with pytest.raises(TypeError, match=name):
            m.with_derived(**{name: "x"})


def test_checks_the_session_time() -> None:
    with pytest.raises(MemoryRecordError) as err:
        _record().with_derived(session_updated_at=float("nan"))
    assert err.value.field == "session_updated_at"
