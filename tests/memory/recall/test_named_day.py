"""A question that names a day finds that day's conversation first, whether its year is
spelled out or read from the tense ("did" asked in December: this January), over
conversations of other days with the same words (real MiniLM)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mnemoray.embedders import open_embedder
from mnemoray.memory.recall.axes import DAY_BOOST, query_time
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.summarizers import ExtractiveSummarizer
from tests.support.factories import session


def _at(day: str) -> float:
    return datetime.fromisoformat(f"{day}T10:00:00+00:00").astimezone(UTC).timestamp()


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> MemoryService:
    svc = MemoryService(
        MemoryStore(tmp_path_factory.mktemp("named-day") / "store"),
        open_embedder("default"),
        ExtractiveSummarizer(),
    )
    svc.add_session(
        session(
            "jan11",
            _at("2026-01-11"),
            ("u", "Let's talk about the garden: the tomatoes need staking."),
            ("m", "Stake them early and water the roots, not the leaves."),
        )
    )
    # Talks of other days in the same words, one of them on another month's 11th: the
    # Jan-11 one ranked 5th behind them before the time axis could move it.
    later = [
        ("2026-01-21", "the budget: the rent went up again", "Track it monthly and cut one bill."),
        ("2026-01-21", "the trip: the train is cheaper", "Book early, the fares climb."),
        ("2026-01-22", "the car: the brakes squeak", "Have the pads checked soon."),
        ("2026-02-11", "the party: the cake is ordered", "Then only the invitations are left."),
    ]
    for i, (day, topic, answer) in enumerate(later):
        svc.add_session(
            session(f"later{i}", _at(day), ("u", f"Let's talk about {topic}."), ("m", answer))
        )
    return svc


@pytest.mark.parametrize(
    "question",
    ["What did we talk about on January 11, 2026?", "What did we talk about on January 11?"],
)
def test_the_day_named_ranks_its_conversation_first(service: MemoryService, question: str) -> None:
    asked = service.resolve("app", "alice", question, 5, now=_at("2026-12-01"))
    got = service.recall(asked)
    assert got and got[0].memory.session_id == "jan11"
    assert got[0].signals.get("time", 0.0) > 0.0


def test_only_a_named_day_counts_the_time_axis_more() -> None:
    asked = _at("2026-12-01")
    assert query_time("What did we talk about on January 11?", asked).time_factor() == DAY_BOOST
    assert query_time("What did we talk about in January?", asked).time_factor() == 1.0
    assert query_time("What did we talk about?", asked).time_factor() == 1.0
