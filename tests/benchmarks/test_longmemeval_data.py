"""LongMemEval questions as sessions: one user per question, repeated session ids kept
apart, sessions in date order, every event traced back to its session and turn."""

from __future__ import annotations

from datetime import datetime, timezone

from benchmarks import longmemeval_data as lme
from tests.support.longmemeval import ITEM


def test_a_date_reads_as_utc():
    assert (
        lme.parse_date("2023/05/20 (Sat) 02:21")
        == datetime(2023, 5, 20, 2, 21, tzinfo=timezone.utc).timestamp()
    )


def test_a_haystack_is_one_user_with_every_event_traced():
    hay = lme.haystack(ITEM)
    assert hay.user_id == "q-q1" and hay.question_type == "multi-session"
    assert {s.app_name for s in hay.sessions} == {lme.APP}
    assert {s.user_id for s in hay.sessions} == {hay.user_id}
    # The repeated id "s_a" is two sessions; the later-dated copy comes first in the data.
    assert [s.session_id for s in hay.sessions] == ["01-s_b", "02-s_a", "00-s_a"]
    assert hay.answer_sessions == {"00-s_a", "02-s_a"}
    assert hay.asked_at == lme.parse_date(ITEM["question_date"])
    for s in hay.sessions:
        assert [hay.turns[e.id].session_id for e in s.events] == [s.session_id] * len(s.events)
        assert [hay.turns[e.id].index for e in s.events] == list(range(len(s.events)))
        assert [e.role for e in s.events] == ["user", "model"]
        assert s.events[0].timestamp == s.created_at < s.events[1].timestamp
    [evidence] = hay.evidence
    turn = hay.turns[evidence]
    assert (turn.session_id, turn.haystack_id, turn.index, turn.evidence) == (
        "00-s_a",
        "s_a",
        0,
        True,
    )
    # The same data gives the same event ids (a cached store stays valid).
    assert lme.haystack(ITEM).turns.keys() == hay.turns.keys()


def test_a_short_run_takes_every_type_in_turn():
    items = [{"question_type": t, "n": i} for i, t in enumerate("aaabbc")]
    assert [it["n"] for it in lme.stratified(items, 4)] == [0, 3, 5, 1]
    assert len(lme.stratified(items, 50)) == 6
