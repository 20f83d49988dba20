"""The archive format: round trips, mixed directories, and bad rows with locations."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mnemoray.backfill.archive import (
    BATCH_ROWS,
    SCHEMA,
    ArchiveError,
    iter_archive,
    read_archive,
    session_from_record,
    write_archive,
)
from mnemoray.sessions.events import Event, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session, SessionError
from tests.support.factories import T2026 as T0


def _session(session_id: str, user: str = "maya", n: int = 2) -> Session:
    s = Session(
        "travel",
        user,
        session_id,
        state={"user:name": "Maya", "leg": 2, "temp:scratch": "x"},
        created_at=T0,
        updated_at=T0 + 10,
        ended_at=T0 + 20,
    )
    for i in range(n):
        s.events.append(
            user_message(
                f"Flüge nach Lissabon {i}",
                id=f"{session_id}-u{i}",
                invocation_id=f"inv{i}",
                timestamp=T0 + i,
                state_delta={"leg": i},
                session_id=session_id,
            )
        )
    call = tool_call(
        "travel_agent",
        "search_flights",
        {"to": "LIS", "max": 100},
        call_id="c1",
        id=f"{session_id}-c",
        timestamp=T0 + n,
        artifact_delta={"plan.md": 3},
        session_id=session_id,
    )
    s.events += [
        call,
        tool_result(
            "travel_agent",
            "search_flights",
            [{"price": 89.5}],
            "c1",
            id=f"{session_id}-r",
            timestamp=T0 + n + 1,
            session_id=session_id,
        ),
        Event(
            author="compactor",
            role="system",
            type="compaction",
            text="Maya flies.",
            id=f"{session_id}-k",
            timestamp=T0 + n + 2,
            session_id=session_id,
            data={
                "start_ts": T0,
                "end_ts": T0 + 1,
                "summary": "Maya flies.",
                "source_event_ids": [f"{session_id}-u0"],
            },
        ),
    ]
    return s


def _expected(s: Session) -> dict[str, Any]:
    d = s.to_dict()
    d["state"] = {k: v for k, v in d["state"].items() if not k.startswith("temp:")}
    return d


@pytest.mark.parametrize("name", ["sessions.parquet", "sessions.jsonl", "sessions.json"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    sessions = [
        _session("s1"),
        _session("s2", user="lee", n=0),
        Session("travel", "new", "s3", created_at=T0),
    ]
    path = write_archive(sessions, tmp_path / "out" / name)
    assert path == tmp_path / "out" / name
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temp file left
    back = read_archive(path)
    assert [b.to_dict() for b in back] == [_expected(s) for s in sessions]
    assert [b.version for b in back] == [5, 3, 0]
    assert back[0].events[2].data == {
        "name": "search_flights",
        "args": {"to": "LIS", "max": 100},
        "call_id": "c1",
    }


@pytest.mark.parametrize("name", ["sessions.parquet", "sessions.jsonl"])
def test_temp_state_is_not_archived(tmp_path: Path, name: str) -> None:
    s = _session("s1", n=1)  # built in memory: its state and an event's delta hold temp:
    s.events.append(
        user_message("pin", id="s1-p", timestamp=T0 + 9, state_delta={"temp:pin": "4711", "k": 1})
    )
    path = write_archive([s], tmp_path / name)
    assert b"temp:" not in path.read_bytes() and b"4711" not in path.read_bytes()
    assert read_archive(path)[0].events[-1].state_delta == {"k": 1}


def test_parquet_schema_and_streaming(tmp_path: Path) -> None:
    n = BATCH_ROWS + 44  # more than one batch each way
    path = write_archive((_session(f"s{i}", n=1) for i in range(n)), tmp_path / "a.parquet")
    meta = pq.ParquetFile(path)
    assert meta.schema_arrow == SCHEMA and meta.metadata.num_rows == n
    event_type = SCHEMA.field("events").type.value_type
    assert pa.types.is_string(event_type.field("data").type)  # JSON-encoded payloads
    rows = list(iter_archive(path))
    assert [r.location for r in rows[-2:]] == [f"a.parquet:row {n - 2}", f"a.parquet:row {n - 1}"]
    assert all(r.ok for r in rows) and rows[-1].session is not None
    assert rows[-1].session.session_id == f"s{n - 1}"
    assert json.loads(rows[0].raw["state"]) == {"user:name": "Maya", "leg": 2}


def test_iso_and_epoch_timestamps(tmp_path: Path) -> None:
    rows = [
        {
            "app_name": "a",
            "user_id": "u",
            "session_id": "iso",
            "created_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T01:00:00+01:00",
            "events": [
                {"author": "user", "text": "hi", "timestamp": "2026-01-01T00:00:05.5Z"},
                {
                    "author": "agent",
                    "role": "model",
                    "text": "yo",
                    "timestamp": "2026-01-01T00:00:07",
                },
            ],
        },
        {
            "app_name": "a",
            "user_id": "u",
            "session_id": "epoch",
            "created_at": T0,
            "events": [
                {"author": "user", "text": "hi", "timestamp": T0 + 5},
                {"author": "user", "text": "int", "timestamp": int(T0) + 6},
                {"author": "user", "text": "str", "timestamp": f"{T0 + 7}"},
            ],
        },
    ]
    path = tmp_path / "ts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    iso, epoch = read_archive(path)
    assert iso.created_at == T0 and iso.ended_at == T0  # +01:00 is the same instant
    assert [e.timestamp for e in iso.events] == [T0 + 5.5, T0 + 7]  # naive = UTC
    assert iso.updated_at == T0 + 7  # defaults to the last event
    assert [e.timestamp for e in epoch.events] == [T0 + 5, T0 + 6, T0 + 7]


def test_directory_of_mixed_files(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    write_archive([_session("p1"), _session("p2")], root / "part-0.parquet")
    write_archive([_session("j1")], root / "day=2" / "part-1.jsonl")
    (root / "adk.json").write_text(
        json.dumps(
            {
                "id": "adk1",
                "appName": "travel",
                "userId": "maya",
                "lastUpdateTime": T0,
                "events": [
                    {
                        "id": "a",
                        "author": "user",
                        "timestamp": T0,
                        "content": {"role": "user", "parts": [{"text": "hello"}]},
                        "actions": {"stateDelta": {}},
                    }
                ],
            }
        )
    )
    (root / "many.json").write_text(
        json.dumps([_expected(_session("m1", n=0)), _expected(_session("m2", n=0))])
    )
    (root / "_SUCCESS").write_text("")
    (root / ".part-9.jsonl.tmp").write_text("half written")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "x.jsonl").write_text("{broken")
    (root / "README.md").write_text("not data")

    rows = list(iter_archive(root))
    assert [r.location for r in rows] == [
        "adk.json",
        "day=2/part-1.jsonl:1",
        "many.json[0]",
        "many.json[1]",
        "part-0.parquet:row 0",
        "part-0.parquet:row 1",
    ]
    assert all(r.ok for r in rows), [r.error for r in rows]
    ids = [r.session.session_id for r in rows if r.session]
    assert ids == ["adk1", "j1", "m1", "m2", "p1", "p2"]
    adk = rows[0].session
    assert adk is not None and adk.events[0].text == "hello" and adk.events[0].role == "user"


def _good_line(session_id: str) -> str:
    return json.dumps(
        {
            "app_name": "a",
            "user_id": "u",
            "session_id": session_id,
            "events": [{"author": "user", "text": "hi", "timestamp": T0}],
        }
    )


def test_bad_rows_reported_with_location_and_field(tmp_path: Path) -> None:
    bad_role = {
        "app_name": "a",
        "user_id": "u",
        "session_id": "b1",
        "events": [
            {"author": "user", "text": "1", "timestamp": T0},
            {"author": "user", "text": "2", "timestamp": T0},
            {"author": "x", "role": "bot", "text": "3", "timestamp": T0},
        ],
    }
    lines = [
        _good_line("g1"),
        "",  # blank lines hold no row
        json.dumps(bad_role),
        '{"app_name": "a", "user_id": ',  # malformed JSON
        json.dumps([1, 2]),
        json.dumps({"app_name": "a", "user_id": "u"}),
        json.dumps(
            {
                "app_name": "a",
                "user_id": "u",
                "session_id": "b2",
                "events": [{"author": "u", "timestamp": "soon"}],
            }
        ),
        json.dumps(
            {
                "app_name": "a",
                "user_id": "u",
                "session_id": "b3",
                "events": [{"text": "no author", "timestamp": T0}],
            }
        ),
        json.dumps(
            {
                "app_name": "a",
                "user_id": "u",
                "session_id": "b4",
                "events": [{"author": "u", "mood": "happy"}],
            }
        ),
        json.dumps(
            {
                "app_name": "a",
                "user_id": "u",
                "session_id": "b5",
                "events": [{"author": "u", "id": "x"}, {"author": "u", "id": "x"}],
            }
        ),
        json.dumps({"app_name": "a", "user_id": "u", "session_id": "b6", "events": [7]}),
        _good_line("g2"),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"app_name": "\xff"}\n')

    rows = list(iter_archive(path))
    report = {r.location: r.error for r in rows}
    assert report == {
        "mixed.jsonl:1": None,
        "mixed.jsonl:3": "events[2].role: 'bot' is not one of user, model, tool, system",
        "mixed.jsonl:4": report["mixed.jsonl:4"],
        "mixed.jsonl:5": "expected a JSON object, got list",
        "mixed.jsonl:6": "session_id: missing or not a non-empty string",
        "mixed.jsonl:7": "events[0].timestamp: not ISO-8601 or epoch seconds: 'soon'",
        "mixed.jsonl:8": "events[0].author: missing",
        "mixed.jsonl:9": "events[0].mood: unknown event field",
        "mixed.jsonl:10": "events[1].id: duplicate event id 'x'",
        "mixed.jsonl:11": "events[0]: expected an object, got int",
        "mixed.jsonl:12": None,
        "mixed.jsonl:13": report["mixed.jsonl:13"],
    }
    assert report["mixed.jsonl:4"].startswith("invalid JSON: ")
    assert report["mixed.jsonl:13"].startswith("not UTF-8")
    malformed = next(r for r in rows if r.location == "mixed.jsonl:4")
    assert malformed.raw == '{"app_name": "a", "user_id":' and malformed.session is None
    bad = next(r for r in rows if r.location == "mixed.jsonl:3")
    assert bad.raw == bad_role  # the original record, for the quarantine file
    assert [r.session.session_id for r in rows if r.session] == ["g1", "g2"]


def test_bad_parquet_rows_and_files(tmp_path: Path) -> None:
    good = {
        "app_name": "a",
        "user_id": "u",
        "session_id": "g",
        "state": "{}",
        "created_at": T0,
        "updated_at": T0,
        "ended_at": None,
        "events": [],
    }
    bad_event = {
        "id": "e1",
        "invocation_id": "",
        "author": "u",
        "role": "bot",
        "type": "message",
        "timestamp": T0,
        "text": "",
        "data": "{}",
        "state_delta": "{}",
        "artifact_delta": "{}",
        "partial": False,
    }
    rows = [
        good,
        {**good, "session_id": "b1", "events": [bad_event]},
        {**good, "session_id": "b2", "state": "{not json"},
        {**good, "session_id": "b3", "events": [{**bad_event, "role": "user", "data": "[1"}]},
        {**good, "session_id": "g2"},
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "t.parquet")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet")

    report = [(r.location, r.error) for r in iter_archive(tmp_path)]
    assert report[0][0] == "corrupt.parquet" and "unreadable Parquet file" in report[0][1]
    assert report[1:] == [
        ("t.parquet:row 0", None),
        ("t.parquet:row 1", "events[0].role: 'bot' is not one of user, model, tool, system"),
        ("t.parquet:row 2", report[3][1]),
        ("t.parquet:row 3", report[4][1]),
        ("t.parquet:row 4", None),
    ]
    assert report[3][1].startswith("state: invalid JSON")
    assert report[4][1].startswith("events[0].data: invalid JSON")


def test_json_file_errors(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"app_name": ')
    (tmp_path / "lines.json").write_text(_good_line("l1") + "\n" + _good_line("l2") + "\n")
    rows = list(iter_archive(tmp_path))
    assert rows[0].location == "broken.json" and rows[0].error is not None
    assert rows[0].error.startswith("invalid JSON")
    # JSON Lines saved under a .json name are read line by line.
    assert [(r.location, r.ok) for r in rows[1:]] == [
        ("lines.json:1", True),
        ("lines.json:2", True),
    ]


def test_strict_and_lenient_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        "\n".join(
            [
                _good_line("g1"),
                json.dumps(
                    {
                        "app_name": "a",
                        "user_id": "u",
                        "session_id": "b",
                        "events": [{"author": "u", "type": "chat"}],
                    }
                ),
                _good_line("g2"),
            ]
        )
        + "\n"
    )
    with pytest.raises(ArchiveError) as info:
        read_archive(path)
    assert str(info.value) == (
        "s.jsonl:2: events[0].type: 'chat' is not one of message, "
        "tool_call, tool_result, control, error, compaction"
    )
    assert info.value.location == "s.jsonl:2" and info.value.reason.startswith("events[0].type")
    with caplog.at_level(logging.WARNING, logger="mnemoray.backfill.archive"):
        sessions = read_archive(path, strict=False)
    assert [s.session_id for s in sessions] == ["g1", "g2"]
    assert "s.jsonl:2" in caplog.text and "events[0].type" in caplog.text  # not silent


def test_missing_and_unsupported_paths(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="no such file"):
        list(iter_archive(tmp_path / "nope"))
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(ArchiveError, match=r"x\.csv: unsupported file type"):
        list(iter_archive(tmp_path / "x.csv"))
    assert list(iter_archive(tmp_path)) == []  # a directory with no archive files


def test_write_errors_leave_nothing_half_written(tmp_path: Path) -> None:
    target = tmp_path / "a.parquet"
    write_archive([_session("old")], target)
    before = target.read_bytes()
    bad = Session("a", "u", "bad", events=[Event(author="u", data={"blob": b"\x00"})])
    for path in (target, tmp_path / "b.jsonl"):
        with pytest.raises(ArchiveError, match=r"sessions\[1\] \(bad\): events\[0\]\.data"):
            write_archive([_session("ok"), bad], path)
    assert target.read_bytes() == before  # the old archive is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet"]  # no temp, no b.jsonl
    with pytest.raises(ValueError, match="fmt"):
        write_archive([], tmp_path / "c.jsonl", fmt="parquet")
    with pytest.raises(ValueError, match=r"c\.txt"):
        write_archive([], tmp_path / "c.txt")


def test_session_from_record_is_the_one_parser() -> None:
    raw = _expected(_session("s1"))
    assert session_from_record(raw).to_dict() == raw
    with pytest.raises(SessionError, match="expected a JSON object"):
        session_from_record(["not", "a", "dict"])  # type: ignore[arg-type]
    # Parquet-style record: JSON-encoded state and payloads.
    columnar = {
        **raw,
        "state": json.dumps(raw["state"]),
        "events": [
            {**e, "data": json.dumps(e["data"]), "state_delta": "", "artifact_delta": None}
            for e in raw["events"]
        ],
    }
    parsed = session_from_record(columnar)
    assert parsed.state == raw["state"] and parsed.events[2].data["call_id"] == "c1"
