"""The long-conversation benchmark: its generator (benchmarks/longconv_data.py) and
its strict scorer and end-to-end run (benchmarks/longconv_bench.py)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks import longconv_bench as bench
from benchmarks import longconv_data as data
from mnemoray.backfill.archive import read_archive
from mnemoray.text import terms

CFG = data.LongConvConfig(pairs=2, sessions=20, seed=5)


@pytest.fixture(scope="module")
def dataset() -> data.Dataset:
    return data.generate(CFG)


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


def test_generator_is_deterministic(dataset, tmp_path):
    data.write_dataset(dataset, tmp_path / "a")
    data.write_dataset(data.generate(CFG), tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    # A pair does not depend on how many pairs are generated.
    one = data.generate(data.LongConvConfig(pairs=1, sessions=20, seed=5))
    assert [s.to_dict() for s in one.sessions] == [s.to_dict() for s in dataset.sessions[:20]]
    other = data.generate(data.LongConvConfig(pairs=2, sessions=20, seed=6))
    assert [q["question"] for q in other.questions] != [q["question"] for q in dataset.questions]


def test_shape_of_the_conversations(dataset):
    assert len(dataset.sessions) == CFG.pairs * CFG.sessions
    by_pair: dict[str, list] = {}
    for s in dataset.sessions:
        by_pair.setdefault(s.user_id, []).append(s)
        assert CFG.min_turns <= len(s.events) <= CFG.max_turns
        assert {e.role for e in s.events} == {"user"}
        assert len({e.author for e in s.events}) == 2
    for sessions in by_pair.values():
        days = [s.created_at for s in sessions]
        assert days == sorted(days) and (days[-1] - days[0]) / 86_400 > 90  # months apart
    assert {q["kind"] for q in dataset.questions} == set(data.KINDS)


def test_every_evidence_turn_exists_and_states_the_answer(dataset, tmp_path):
    data.write_dataset(dataset, tmp_path)
    sessions = read_archive(tmp_path / "archive")
    events = {e.id: (s, e) for s in sessions for e in s.events}
    questions = data.read_questions(tmp_path / "questions.jsonl")
    assert len({q["qid"] for q in questions}) == len(questions) == len(dataset.questions)
    for q in questions:
        assert q["evidence"], q["qid"]
        for ev in [*q["evidence"], *q.get("stale", [])]:
            session, event = events[ev["event_id"]]
            assert session.session_id == ev["session_id"] and session.user_id == q["user_id"]
            assert ev["key"] in event.text
            assert bench.holds(event.text, ev), (q["qid"], ev)
            for word in ev["must"]:
                assert set(terms(word)) <= set(terms(ev["key"])), (q["qid"], word)
        if q["kind"] == "multi_session":
            assert len({ev["session_id"] for ev in q["evidence"]}) >= 2
        if q["kind"] == "changed_now":
            old, new = q["stale"][0], q["evidence"][0]
            assert old["session_id"] < new["session_id"]
            assert not bench.holds(new["key"], old)  # the change does not repeat the old value


def test_time_answers_follow_from_the_session_date():
    tuesday = datetime(2023, 5, 9, 19, tzinfo=timezone.utc)
    assert data.event_date(tuesday, "yesterday") == ("2023-05-08", "on 8 May 2023")
    assert data.event_date(tuesday, "last Saturday") == ("2023-05-06", "on Saturday 6 May 2023")
    saturday = datetime(2023, 5, 13, 19, tzinfo=timezone.utc)
    assert data.event_date(saturday, "last Saturday")[0] == "2023-05-06"
    assert data.event_date(tuesday, "last month") == ("2023-04", "in April 2023")
    assert data.event_date(tuesday, "two weeks ago")[0] == "2023-04-25"


QUESTION = {
    "qid": "q1",
    "kind": "single_session",
    "evidence": [
        {
            "event_id": "e7",
            "session_id": "s1",
            "key": "I found out I'm allergic to pollen, which explains a lot.",
            "must": ["pollen"],
            "date": "2023-05-09",
        }
    ],
}


def test_strict_scorer_needs_the_citation_and_the_words():
    chunk = "[2023-05-09] Mel: I found out I'm allergic to pollen, which explains a lot."
    hit = bench.Item(chunk, frozenset({"e6", "e7"}))
    wrong_turn = bench.Item(chunk, frozenset({"e8"}))  # the words, not the citation
    summary = bench.Item("User: We talked about allergies.", frozenset({"e1", "e7"}))
    no_value = bench.Item(
        "[2023-05-09] Mel: I found out I'm allergic, which explains a lot.", frozenset({"e7"})
    )
    filler = bench.Item("[2023-05-09] Caro: " + "Haha, that is so you. " * 40, frozenset({"e1"}))
    assert bench.judge(QUESTION, [hit])["R@5"] == 1.0
    for miss in (wrong_turn, summary, no_value):
        j = bench.judge(QUESTION, [miss])
        assert (j["R@5"], j["R@10"], j["ranks"]) == (0.0, 0.0, [None]), miss
    # Rank 6 counts for R@10, not R@5; 900 tokens of filler before it push the stating
    # sentence past the 1,000-token budget.
    j = bench.judge(QUESTION, [filler] * 5 + [hit])
    assert (j["R@5"], j["R@10"], j["ranks"]) == (0.0, 1.0, [6])
    assert j["tok@1000"] == 0.0
    assert bench.judge(QUESTION, [filler, hit])["tok@1000"] == 1.0


def test_stale_flags_for_changed_facts():
    now = {
        "event_id": "n",
        "session_id": "s9",
        "key": "We finally moved to Berlin last weekend.",
        "must": ["Berlin"],
        "date": "",
    }
    old = {
        "event_id": "o",
        "session_id": "s2",
        "key": "I love living in Toronto.",
        "must": ["Toronto"],
        "date": "",
    }
    q = {"qid": "q2", "kind": "changed_now", "evidence": [now], "stale": [old]}
    old_item = bench.Item("[d] Mel: I love living in Toronto.", frozenset({"o"}))
    new_item = bench.Item("[d] Mel: We finally moved to Berlin last weekend.", frozenset({"n"}))
    stale = bench.judge(q, [old_item, new_item])
    assert stale["stale@1"] and stale["stale_first"] and stale["R@5"] == 1.0
    fresh = bench.judge(q, [new_item, old_item])
    assert not fresh["stale@1"] and not fresh["stale_first"]
    summary = bench.summarize([stale, fresh])
    assert summary["stale@1"] == 0.5 and summary["n"] == 2


@pytest.mark.slow
def test_quick_run_writes_a_well_formed_result(tmp_path, capsys):
    out = tmp_path / "longconv.json"
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\n## Other\n\ntext\n")
    args = [
        "--quick",
        "--pairs",
        "1",
        "--modes",
        "keyword",
        "--cache",
        str(tmp_path / "c"),
        "--out",
        str(out),
        "--readme",
        str(readme),
    ]
    assert bench.main(args) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "longconv" and result["config"]["modes"] == ["keyword"]
    assert result["commit"]["sha"] and result["machine"]["cpus"]
    assert result["ingest"]["sessions"] == 20 and result["ingest"]["memories"] > 20
    for label in ("keyword", bench.BASELINE):
        kinds = result["quality"][label]["by_kind"]
        assert set(kinds) == {"all", *data.KINDS}
        for m in kinds.values():
            assert m["n"] > 0 and 0.0 <= m["R@5"] <= m["R@10"] <= 1.0
            assert 0.0 <= m["tok@1000"] <= m["R@10"]
        assert "stale@1" in kinds["changed_now"]
    assert kinds["all"]["n"] == sum(kinds[k]["n"] for k in data.KINDS[:4])
    ranks = json.loads((tmp_path / result["per_question_file"]).read_text())
    assert set(ranks) == {"keyword", bench.BASELINE}
    assert len(ranks["keyword"]) == result["dataset"]["questions"]
    assert all(r is None or 1 <= r <= 10 for rs in ranks["keyword"].values() for r in rs)
    text = readme.read_text()
    assert text.startswith("# Benchmarks\n\n## Other\n\ntext\n\n## Long conversations")
    assert "single_session" in text
    # A second run replaces the section instead of adding one.
    assert bench.main(args) == 0
    assert readme.read_text().count("## Long conversations") == 1
    assert "R@10" in capsys.readouterr().out


def test_bad_mode_is_one_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--modes", "fuzzy"])
    assert exc.value.code == 2
    assert "--modes" in capsys.readouterr().err
