"""The time axis, recency by time intent, the axes each result names, and chunk windows."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from mnemoray.memory.recall.axes import query_time, time_facts
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.retriever import rank_proposed
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.records.filters import RecallFilters, RetrievalError
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import user_message
from mnemoray.sessions.session import Session
from mnemoray.summarizers import Fact, Summary


def ts(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp()


def mem(text: str, t: float, kind: str = "chunk", sid: str = "s1") -> Memory:
    return Memory("app", "mel", sid, kind, text, event_time_start=t, event_time_end=t, created_at=t)


def rank(
    memories: list[Memory],
    query: str,
    dense: list[float] | None,
    *,
    top_k: int = 10,
    now: float | None = None,
    **filters,
) -> list:
    mode = "keyword" if dense is None else "hybrid"
    return rank_proposed(
        RetrievalConfig(),
        memories,
        dense,
        "app",
        query,
        None if dense is None else np.ones(4, np.float32),
        top_k,
        RecallFilters(**filters),
        mode,
        now,
        one_user=True,
    )


def test_a_named_period_finds_records_of_that_time_even_without_a_word_in_common() -> None:
    may = mem("[2023-05-20] Mel: We painted the fence together.", ts("2023-05-20"))
    june = mem("[2023-06-20] Mel: We went camping by the lake.", ts("2023-06-20"))
    march = mem("[2023-03-02] Mel: Then last May we went camping, remember?", ts("2023-03-02"))
    got = rank([june, may, march], "what did we do in May 2023?", [0.30, 0.30, 0.30])
    assert got[0].memory is may
    assert got[0].signals["time"] == 1.0 and got[0].signals["time_rank"] == 1
    assert "time" in got[0].axes and "dense" in got[0].axes
    assert got[-1].signals["time"] == 0.0 and "time" not in got[-1].axes
    # Keyword mode: no word of the question is in the May record, the time axis finds it
    # (the others match words: "May" said of 2022, "2023" in a line's date).
    kw = rank([june, may, march], "what did we do in May 2023?", None)
    assert kw[0].memory is may and "time" in kw[0].axes
    assert all("time" not in r.axes for r in kw[1:])
    # A time the record's own words name counts too ("last May" said in March 2024).
    said_later = mem("[2024-03-02] Mel: Last May we painted the fence.", ts("2024-03-02"))
    hit = rank([june, said_later], "what did we do in May 2023?", [0.3, 0.3])
    assert hit[0].memory is said_later and hit[0].signals["time"] == 1.0


def test_relative_periods_in_the_question_read_against_reference_time() -> None:
    may22 = mem("[2022-05-10] Mel: We painted the fence.", ts("2022-05-10"))
    may23 = mem("[2023-05-10] Mel: We painted the shed.", ts("2023-05-10"))
    q = "what did we paint last May?"
    in_june_23 = rank([may22, may23], q, [0.3, 0.3], reference_time="2023-06-12")
    assert in_june_23[0].memory is may23 and in_june_23[0].signals["time"] == 1.0
    in_april_23 = rank([may22, may23], q, [0.3, 0.3], reference_time="2023-04-01")
    assert in_april_23[0].memory is may22
    # Without a reference the recall's own time (now) is the reference.
    assert rank([may22, may23], q, [0.3, 0.3], now=ts("2022-07-01"))[0].memory is may22


def test_a_when_question_prefers_the_record_that_states_the_time() -> None:
    fact = mem("We adopted a greyhound named Juniper.", ts("2023-06-10"), kind="fact")
    chunk = mem(
        "[2023-06-10] Alex: We adopted a greyhound named Juniper three days ago.", ts("2023-06-10")
    )
    dated = mem("[2023-06-10] Alex: Juniper the greyhound loves the park.", ts("2023-06-10"))
    got = rank([fact, dated, chunk], "When did Alex adopt Juniper?", [0.52, 0.50, 0.50])
    assert [r.memory for r in got] == [chunk, dated, fact]
    assert got[0].signals["time"] > got[1].signals["time"] > got[2].signals["time"] == 0.0
    assert "time" in got[0].axes and "time_rank" not in got[0].signals  # raised, not found
    # Without a "when" the time axis is silent and the closer meaning wins.
    plain = rank([fact, dated, chunk], "Tell me about Juniper", [0.52, 0.50, 0.50])
    assert plain[0].memory is fact and "time" not in plain[0].signals


def test_recency_follows_the_question_now_before_or_neither() -> None:
    old = mem(
        "[2023-03-01] Alex: Our neighborhood in Toronto has the best bakeries.", ts("2023-03-01")
    )
    new = mem("[2023-09-01] Alex: We finally moved to Berlin last weekend.", ts("2023-09-01"))
    dense = [0.50, 0.49]  # the older statement is a hair closer in meaning
    assert rank([old, new], "Where does Alex live?", dense)[0].memory is new  # recency
    before = rank([old, new], "Where did Alex live previously?", dense)
    assert before[0].memory is old and "recency" not in before[0].signals  # off
    # Asking about now counts recency more: it outweighs a larger gap in meaning.
    apart = [0.53, 0.49]
    assert rank([old, new], "Where does Alex live?", apart)[0].memory is old
    assert rank([old, new], "Where does Alex live now?", apart)[0].memory is new


def test_query_time_reads_the_intent() -> None:
    assert query_time("Where do you live these days?", None).present
    assert not query_time("Where did you live before Berlin?", None).present
    qt = query_time("What did we do last May?", "2023-06-12")
    assert qt.active and qt.recency_factor() == 0.0 and "last may" in [c.lower() for c in qt.cues()]
    assert not query_time("tell me about parrots", None).active


def test_time_facts_tell_dated_lines_from_times_in_the_words() -> None:
    ref = ts("2023-06-10")
    plain = time_facts("[2023-06-10] Alex: Juniper loves the park.", ref)
    assert plain.dated and plain.spans == ()
    told = time_facts("[2023-06-10] Alex: We went hiking yesterday.\nEntities: Thursday", ref)
    assert told.dated and told.spans == ((ts("2023-06-09"), ts("2023-06-10")),)
    assert time_facts("We adopted Juniper.", ref) == time_facts("", ref)


def test_reference_time_is_checked_and_named() -> None:
    assert RecallFilters(reference_time="2023-06-12").reference_time == ts("2023-06-12")
    assert RecallFilters.from_dict({"reference_time": 5.0}).to_dict()["reference_time"] == 5.0
    with pytest.raises(RetrievalError) as err:
        RecallFilters(reference_time="soon")
    assert err.value.field == "filters.reference_time"


def test_every_result_names_its_axes_in_the_one_json_form() -> None:
    a = mem("[2023-05-20] Mel: the parrot learned a new word", ts("2023-05-20"))
    b = mem("[2023-05-21] Mel: we bought a cage", ts("2023-05-21"))
    got = rank([a, b], "parrot", [0.6, 0.2])
    assert got[0].axes == ("dense", "bm25") and got[1].axes == ("dense",)
    assert got[0].to_dict()["axes"] == ["dense", "bm25"]


def test_a_record_repeating_a_better_ones_words_is_left_out() -> None:
    chunk = mem("[2023-05-20] Mel: the parrot learned a new word. It says hello.", ts("2023-05-20"))
    quoted = mem("the parrot learned a new word.", ts("2023-05-20"), kind="fact")
    again = mem(
        "The parrot  learned a new word.\nTopics: parrot", ts("2023-06-20"), kind="fact", sid="s2"
    )
    other = mem("[2023-05-21] Mel: we bought the parrot a cage", ts("2023-05-21"))
    got = rank([chunk, quoted, again, other], "parrot word", [0.6, 0.5, 0.5, 0.4])
    # The fact quoted from the chunk stays (its own record); its second copy does not.
    mems = [r.memory for r in got]
    assert mems[0] is chunk and len(mems) == 3 and (quoted in mems) != (again in mems)
    # App-wide (several users' records), equal words are different memories.
    wide = rank_proposed(
        RetrievalConfig(),
        [quoted, again],
        [0.5, 0.5],
        "app",
        "parrot",
        np.ones(4, np.float32),
        10,
        RecallFilters(),
        "hybrid",
    )
    assert len(wide) == 2


# -- chunk windows and keys (mnemoray.memory.records.windows) ----------------------------------
def _session(n: int) -> Session:
    s = Session("app", "mel", "s1", created_at=ts("2023-05-01"))
    for i in range(n):
        s.apply(
            user_message(
                f"turn number {i} about topic{i}",
                author="Mel" if i % 2 else "Ana",
                timestamp=ts("2023-05-01") + 60 * i,
                id=f"e{i}",
            ).with_session("s1")
        )
    return s


def test_overlapping_windows_share_turns_and_stay_stable_as_the_session_grows() -> None:
    records = distill_session(
        _session(7), None, chunk_turns=3, chunk_overlap=1, summarize=False, now=0.0
    )
    windows = [
        [int(t.split()[4]) for t in r.text.splitlines() if "turn number" in t] for r in records
    ]
    assert windows == [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
    grown = distill_session(
        _session(9), None, chunk_turns=3, chunk_overlap=1, summarize=False, now=0.0
    )
    assert [r.memory_id for r in grown[:3]] == [r.memory_id for r in records]
    assert len(grown) == 4
    # No overlap: the windows of before, unchanged.
    plain = distill_session(
        _session(7), None, chunk_turns=3, chunk_overlap=0, summarize=False, now=0.0
    )
    assert [len(r.source_event_ids) for r in plain] == [3, 3, 1]
    with pytest.raises(Exception, match="int >= 0"):
        distill_session(_session(3), None, chunk_overlap=-1, summarize=False)


class _Paraphrasing:
    """A summarizer whose fact says in other words what a turn said."""

    name = "paraphrasing"

    def summarize(self, events):  # noqa: ANN001, ANN201
        first = events[0]
        return Summary(
            summary="a chat",
            key_facts=(
                Fact("Ana owns a bicycle shop.", (first.id,)),
                Fact("turn number 1 about topic1", (events[1].id,)),
            ),
        )


def test_a_chunk_key_adds_the_facts_it_does_not_already_say() -> None:
    records = distill_session(_session(4), _Paraphrasing(), chunk_turns=2, now=0.0)
    first = next(r for r in records if r.kind == "chunk")
    assert first.key_facts == ("Ana owns a bicycle shop.", "turn number 1 about topic1")
    assert "\nFacts: Ana owns a bicycle shop." in first.key_text
    assert first.key_text.count("topic1") == 1  # said in the window: not added again
    # The key names the date once; the text keeps it on every line.
    assert first.text.count("[2023-05-01]") == 2 and first.key_text.count("[2023-05-01]") == 1
