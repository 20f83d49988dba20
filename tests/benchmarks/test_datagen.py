"""Smoke test of the recall benchmark's dataset generator (benchmarks/datagen.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.datagen
from mnemoray.backfill.archive import read_archive
from mnemoray.text import terms


@pytest.fixture(scope="module")
def datagen():
    return benchmarks.datagen


@pytest.fixture(scope="module")
def tiny(datagen, tmp_path_factory):
    cfg = datagen.DatasetConfig(users=6, sessions_per_user=4, seed=11)
    out = tmp_path_factory.mktemp("ds")
    meta = datagen.write_dataset(datagen.generate(cfg), out)
    return cfg, out, meta


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


def test_deterministic(datagen, tiny, tmp_path):
    cfg, out, _ = tiny
    again = tmp_path / "again"
    datagen.write_dataset(datagen.generate(cfg), again)
    assert _files(out) == _files(again)
    other = datagen.generate(datagen.DatasetConfig(users=6, sessions_per_user=4, seed=12))
    assert [q["query"] for q in other.queries] != [
        json.loads(line)["query"] for line in (out / "queries.jsonl").read_text().splitlines()
    ]
    # A user's data does not depend on how many users are generated.
    small = datagen.generate(datagen.DatasetConfig(users=2, sessions_per_user=4, seed=11))
    big = datagen.generate(cfg)
    assert [s.to_dict() for s in small.sessions] == [s.to_dict() for s in big.sessions[:8]]


def test_ground_truth_integrity(tiny):
    cfg, out, meta = tiny
    sessions = read_archive(out / "archive")
    assert len(sessions) == cfg.users * cfg.sessions_per_user == meta["sessions"]
    by_id = {s.session_id: s for s in sessions}
    assert len(by_id) == len(sessions)
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert queries and len({q["qid"] for q in queries}) == len(queries)
    required = {
        "qid",
        "app_name",
        "user_id",
        "query",
        "answer_session_id",
        "answer_event_ids",
        "answer_text",
        "kind",
    }
    for q in queries:
        assert required <= set(q)
        assert q["kind"] in ("paraphrase", "keyword", "changed")
        session = by_id[q["answer_session_id"]]
        assert (session.app_name, session.user_id) == (q["app_name"], q["user_id"])
        events = {e.id: e for e in session.events}
        assert q["answer_event_ids"]
        for event_id in q["answer_event_ids"]:
            event = events[event_id]  # exists in the answer session
            assert event.role == "user" and event.type == "message"
            assert any(a.lower() in event.text.lower() for a in q["answer_aliases"])
        assert q["answer_text"] in q["answer_aliases"]
        shared = set(terms(q["query"])) & set(
            terms(" ".join(events[i].text for i in q["answer_event_ids"]))
        )
        if q["kind"] == "keyword":
            assert shared
        if q["kind"] == "paraphrase":
            assert not shared


def test_changed_answers_are_the_newer_session(tiny):
    cfg, out, _ = tiny
    sessions = {s.session_id: s for s in read_archive(out / "archive")}
    changed = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    changed = [q for q in changed if q["kind"] == "changed"]
    assert changed
    for q in changed:
        new, old = sessions[q["answer_session_id"]], sessions[q["stale_session_id"]]
        assert old.user_id == new.user_id == q["user_id"]
        assert old.created_at < new.created_at and old.session_id < new.session_id
        new_event = next(e for e in new.events if e.id == q["answer_event_ids"][0])
        old_event = next(e for e in old.events if e.id == q["stale_event_ids"][0])
        assert old_event.timestamp < new_event.timestamp
        assert q["stale_text"] != q["answer_text"]
        assert q["stale_text"].lower() in old_event.text.lower()
        assert q["answer_text"].lower() in new_event.text.lower()
