"""The LongMemEval benchmark's strict scorer (benchmarks/longmemeval_bench.py): session
recall over distinct sessions, turn recall that needs the citation and the words, the
token budget; and its one-line refusal of a missing data file."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from benchmarks import longmemeval_bench as bench
from benchmarks import longmemeval_data as lme
from benchmarks.longconv_bench import Item
from tests.support.longmemeval import EVIDENCE, ITEM


def _haystack(sessions: int = 12) -> lme.Haystack:
    """One event per session ``s<i>`` (event ``e<i>``); the evidence is ``e11``."""
    turns = {
        f"e{i}": lme.Turn(f"s{i}", f"s{i}", 0, EVIDENCE if i == 11 else f"filler {i}", i == 11)
        for i in range(sessions)
    }
    return lme.Haystack(
        question_id="q",
        question_type="multi-session",
        question="What is the name of my dog?",
        asked_at=0.0,
        user_id="q-q",
        sessions=[],
        turns=turns,
        answer_sessions=frozenset({"s3", "s11"}),
        evidence=("e11",),
    )


def _from(*sessions: int) -> list[Item]:
    return [Item(f"[d] user: filler {i}", frozenset({f"e{i}"})) for i in sessions]


def test_session_recall_counts_distinct_sessions():
    hay = _haystack()
    j = bench.judge(hay, _from(0, 0, 1, 1, 2, 3, 4, 11))  # distinct: 0 1 2 3 4 11
    assert (j["S@5"], j["S@10"], j["allS@10"]) == (1.0, 1.0, 1.0)
    # s3 is the 12th item but the 10th session; s11 the 11th session.
    j = bench.judge(hay, _from(0, 0, 1, 1, 2, 4, 5, 6, 7, 8, 9, 3, 11))
    assert (j["S@5"], j["S@10"], j["allS@10"]) == (0.0, 1.0, 0.0)
    # An item citing no event of the haystack names no session.
    j = bench.judge(hay, [Item("x", frozenset({"elsewhere"})), *_from(3)])
    assert j["S@5"] == 1.0


def test_a_turn_counts_only_with_its_citation_and_its_words():
    hay = _haystack()
    chunk = f"[2023-05-01] user: {EVIDENCE}\n[2023-05-01] assistant: Congratulations!"
    hit = Item(chunk, frozenset({"e11", "e10"}), "chunk")
    wrong_turn = Item(chunk, frozenset({"e10"}))
    summary = Item("The user talked about a new pet.", frozenset({"e11"}), "session_summary")
    assert bench.judge(hay, [hit])["T@10"] == 1.0
    for miss in (wrong_turn, summary):
        j = bench.judge(hay, [miss])
        assert (j["T@10"], j["T@1000"], j["ranks"]) == (0.0, 0.0, [None]), miss
    # Rank 11 is outside T@10 but, after ten short items, inside the token budget; 1,000
    # tokens of filler before it push it out.
    j = bench.judge(hay, [*_from(*range(10)), hit])
    assert (j["T@10"], j["T@1000"], j["ranks"]) == (0.0, 1.0, [11])
    filler = Item("[d] assistant: " + "Sure, here is more. " * 200, frozenset({"e0"}))
    j = bench.judge(hay, [filler, hit])
    assert (j["T@10"], j["T@1000"]) == (1.0, 0.0)
    assert j["tokens_top10"] > 1000 and j["kinds_top10"] == {"": 1, "chunk": 1}


def test_a_question_without_evidence_turns_is_left_out_of_turn_recall():
    hay = _haystack()
    none = replace(hay, question_id="q0", evidence=())
    judged = [bench.judge(none, _from(3)), bench.judge(hay, _from(11))]
    assert judged[0]["T@10"] is None
    summary = bench.by_type(judged)
    assert summary["all"]["n"] == 2 and summary["all"]["T@10"] == 0.0
    assert summary["all"]["S@5"] == 1.0 and set(summary) == {"all", "multi-session"}


def test_the_real_shape_scores_through_the_event_map():
    hay = lme.haystack(ITEM)
    [session] = [s for s in hay.sessions if s.session_id == "00-s_a"]
    text = "\n".join(f"[2023-05-01] {e.author}: {e.text}" for e in session.events)
    j = bench.judge(hay, [Item(text, frozenset(e.id for e in session.events))])
    assert (j["S@5"], j["allS@10"], j["T@10"]) == (1.0, 0.0, 1.0)  # one copy of s_a of two


def test_a_missing_data_file_is_one_line(tmp_path, capsys):
    assert bench.main(["--data", str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "absent.json" in err and "--data" in err


@pytest.mark.slow
def test_a_run_writes_its_result_and_reuses_its_store(tmp_path):
    data = tmp_path / "lme.json"
    data.write_text(json.dumps([ITEM]))
    out, history = tmp_path / "r" / "longmemeval.json", tmp_path / "HISTORY.md"
    args = ["--data", str(data), "--cache", str(tmp_path / "c"), "--out", str(out)]
    args += ["--history", str(history)]
    assert bench.main(args) == 0
    result = json.loads(out.read_text())
    assert result["ingest"]["sessions"] == 3 and result["ingest"]["memories"] > 3
    assert set(result["quality"]) == {*bench.MODES, bench.BUDGETED, bench.BASELINE}
    for block in result["quality"].values():
        assert set(block["by_type"]) == {"all", "multi-session"}
        assert block["by_type"]["all"]["S@10"] == 1.0  # one user, three sessions
    ranks = json.loads((out.parent / result["per_question_file"]).read_text())
    assert set(ranks["hybrid"]) == {"q1"}
    assert "## LongMemEval" in history.read_text()
    [store] = (tmp_path / "c").iterdir()
    ledger = (store / "ingested.json").read_text()
    # A second run ingests nothing: the cached store answers.
    assert bench.main([*args, "--modes", "keyword", "--no-baseline"]) == 0
    assert list((tmp_path / "c").iterdir()) == [store]
    assert (store / "ingested.json").read_text() == ledger
    assert json.loads(out.read_text())["ingest"] == result["ingest"]
