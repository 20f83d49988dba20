"""Hostile and malformed input, and what the server exposes.

- A lone surrogate, a non-finite or absurd time, NaN in state, an oversize event or
  row: refused at every entrance (Python API, archive rows, HTTP) with the field
  named; in a backfill the row goes to quarantine and the rest commits.
- /docs and /openapi.json are closed by default when API keys are on.
- ``mnemoray serve`` starts its local Ray bound to the loopback interface.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from mnemoray import limits
from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.backfill.archive import SCHEMA as ARCHIVE_SCHEMA
from mnemoray.backfill.archive import iter_archive
from mnemoray.backfill.steps import validate_rows
from mnemoray.errors import InvalidInput, PayloadTooLarge
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.records.record import Memory, MemoryRecordError
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.quarantine import read_quarantine, write_quarantine
from mnemoray.sessions.events import Event, EventError, parse_timestamp
from mnemoray.sessions.session import Session, SessionError
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.sessions.types import SessionNotFoundError
from mnemoray.settings.serve import load_settings
from tests.http.test_routes import KEY, FakeBackend

LONE = "\ud800"
BAD_TIMES = [math.nan, math.inf, -math.inf, 1e300, -1e12, limits.TIME_MAX]
WHO = {"app_name": "app", "user_id": "ana"}
JSON = {"Content-Type": "application/json"}


def session_row(
    sid: str,
    text: str = "I live in Berlin and I love tulips",
    **event: Any,
) -> dict[str, Any]:
    return {
        "app_name": "app",
        "user_id": "ana",
        "session_id": sid,
        "events": [
            {"author": "user", "role": "user", "text": text, "timestamp": 1_700_000_000.0, **event},
            {
                "author": "agent",
                "role": "model",
                "text": "Noted, tulips.",
                "timestamp": 1_700_000_001.0,
            },
        ],
    }


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # ensure_ascii: a lone surrogate is written as the JSON escape \ud800, as a client would.
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")
    return path


def run_backfill(archive: Path, store: Path) -> Any:
    return backfill(BackfillConfig(archive, store, embedder=None, progress_interval_s=0))


def client_for(
    backend: FakeBackend | None = None,
    *,
    max_body_bytes: int = 8 << 20,
    keys: bool = True,
    docs: bool | None = None,
) -> TestClient:
    http = HttpConfig(
        keys=ApiKeys.from_mapping({KEY: "app"}) if keys else ApiKeys.none(),
        max_body_bytes=max_body_bytes,
        allow_remote_without_keys=True,
        **({} if docs is None else {"docs": docs}),
    )
    headers = {"Authorization": f"Bearer {KEY}"} if keys else {}
    return TestClient(
        build_api(backend or FakeBackend(), http), headers=headers, raise_server_exceptions=False
    )


def error_of(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text[:500])
    return r.json()["error"]


# -- 1. lone surrogates --------------------------------------------------------------------
def test_lone_surrogate_is_refused_by_the_python_api() -> None:
    with pytest.raises(EventError) as raised:
        Event(author="user", text=f"a{LONE}b")
    assert raised.value.field == "text" and "surrogate" in str(raised.value)
    with pytest.raises(EventError) as raised:
        Event(author="user", data={"note": LONE})
    assert raised.value.field == "data.note"
    with pytest.raises(SessionError) as raised:
        Session("app", f"ana{LONE}")
    assert raised.value.field == "user_id"
    with pytest.raises(MemoryRecordError) as raised:
        Memory("app", "ana", "s1", "fact", f"tulips {LONE}")
    assert raised.value.field == "text"


def test_validate_rows_quarantines_a_row_it_cannot_hash() -> None:
    # The session parses (the parser ignores the extra key) but the raw row, the
    # ledger key's source, holds a lone surrogate: that row is quarantined, not fatal.
    good_raw, bad_raw = session_row("s1"), {**session_row("s2"), "note": LONE}
    rows = list(iter_archive_from([good_raw, bad_raw]))
    assert all(r.ok for r in rows)
    good, bad = validate_rows(rows)
    assert [i.session.session_id for i in good] == ["s1"]
    assert len(bad) == 1 and bad[0]["location"] == rows[1].location
    assert "surrogate" in bad[0]["reason"] or "encode" in bad[0]["reason"]


def iter_archive_from(raws: list[dict[str, Any]]) -> list[Any]:
    from mnemoray.backfill.archive import parse_row

    return [parse_row(f"mem.jsonl:{i + 1}", raw) for i, raw in enumerate(raws)]


def test_quarantine_writer_keeps_a_lone_surrogate_escaped(tmp_path: Path) -> None:
    n = write_quarantine(
        tmp_path,
        [{"location": "a.jsonl:2", "reason": "bad", "raw": {"text": f"x{LONE}y", "é": "ü"}}],
    )
    assert n == 1
    files = list((tmp_path).rglob("*.jsonl"))
    text = files[0].read_bytes().decode("utf-8")  # valid UTF-8 on disk
    assert "\\ud800" in text
    (row,) = read_quarantine(tmp_path)
    assert row["raw"]["text"] == f"x{LONE}y" and row["raw"]["é"] == "ü"


def test_backfill_quarantines_a_lone_surrogate_row_and_commits_the_rest(tmp_path: Path) -> None:
    archive = write_jsonl(
        tmp_path / "archive" / "a.jsonl",
        [
            session_row("s1"),
            session_row("s2", text=f"tulips {LONE} and roses"),
            {**session_row("s3"), "note": LONE},
            session_row("s4"),
        ],
    )
    report = run_backfill(archive, tmp_path / "store")
    assert report.quarantined == 2 and report.sessions_committed == 2
    store = MemoryStore(tmp_path / "store")
    quarantined = {q["location"]: q for q in store.read_quarantine()}
    assert set(quarantined) == {"a.jsonl:2", "a.jsonl:3"}
    assert "events[0].text" in quarantined["a.jsonl:2"]["reason"]
    assert LONE in quarantined["a.jsonl:2"]["raw"]["events"][0]["text"]
    again = run_backfill(archive, tmp_path / "store")  # a scheduled re-run goes through too
    assert again.sessions_committed == 0 and again.skipped == 2


def test_ray_engine_validate_step_quarantines_it_too(tmp_path: Path) -> None:
    from mnemoray.backfill.busy import Busy
    from mnemoray.pipeline.read import _table
    from mnemoray.pipeline.validate import validate_batch

    rows = iter_archive_from([session_row("s1"), {**session_row("s2"), "note": LONE}])
    table = _table([pickle.dumps(r) for r in rows], Busy())
    validate_batch(table, str(tmp_path / "store"), 1)
    (q,) = MemoryStore(tmp_path / "store", 1).read_quarantine()
    assert q["location"] == "mem.jsonl:2"


def test_http_lone_surrogate_in_an_event_or_state_is_422() -> None:
    c = client_for()
    assert c.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    body = '{"app_name":"app","user_id":"ana","events":[{"author":"u","text":"a\\ud800b"}]}'
    err = error_of(c.post("/v1/sessions/s1/events", content=body, headers=JSON), 422)
    assert err["field"] == "events[0].text"
    body = '{"app_name":"app","user_id":"ana","session_id":"s2","state":{"k":"\\ud800"}}'
    assert error_of(c.post("/v1/sessions", content=body, headers=JSON), 422)["field"].startswith(
        "state"
    )
    r = c.get("/v1/sessions/s1", params=WHO)  # nothing stored that cannot be answered
    assert r.status_code == 200 and r.json()["events"] == []


def test_a_deeply_nested_row_is_quarantined_not_fatal(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    deep = "[" * 100_000 + "]" * 100_000
    nested_state = json.dumps(session_row("s2"))[:-1] + ', "state": {"k": ' + deep + "}}"
    (archive / "a.jsonl").write_text(
        json.dumps(session_row("s1")) + "\n" + deep + "\n" + nested_state + "\n"
    )
    report = run_backfill(archive, tmp_path / "store")
    assert report.quarantined == 2 and report.sessions_committed == 1
    assert all(
        "nested too deeply" in q["reason"]
        for q in MemoryStore(tmp_path / "store").read_quarantine()
    )


# -- 2. times and floats -------------------------------------------------------------------
@pytest.mark.parametrize("bad", BAD_TIMES)
def test_bad_times_are_refused_by_the_python_api(bad: float) -> None:
    with pytest.raises(EventError) as raised:
        Event(author="user", text="hi", timestamp=bad)
    assert raised.value.field == "timestamp"
    with pytest.raises(EventError) as raised:
        Event.from_dict({"author": "user", "text": "hi", "timestamp": bad})
    assert raised.value.field == "timestamp"
    with pytest.raises(SessionError) as raised:
        Session("app", "ana", created_at=bad)
    assert raised.value.field == "created_at"
    with pytest.raises(SessionError) as raised:
        Session.from_dict({**session_row("s1"), "ended_at": bad})
    assert raised.value.field == "ended_at"
    for name in ("event_time_start", "event_time_end", "created_at", "expires_at"):
        with pytest.raises(MemoryRecordError) as raised:
            Memory("app", "ana", "s1", "fact", "tulips", **{name: bad})
        assert raised.value.field == name
        with pytest.raises(MemoryRecordError):
            Memory.from_dict({**WHO, "session_id": "s1", "kind": "fact", "text": "t", name: bad})


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-inf", "1e300", "-1e12"])
def test_bad_time_strings_are_refused(text: str) -> None:
    with pytest.raises(EventError) as raised:
        parse_timestamp(text, "ended_at")
    assert raised.value.field == "ended_at"


def test_valid_times_at_the_edges_are_kept() -> None:
    assert Event(author="u", timestamp=0).timestamp == 0.0
    assert Event(author="u", timestamp=limits.TIME_MAX - 1).timestamp == limits.TIME_MAX - 1
    assert parse_timestamp("9999-12-31T23:59:59Z") < limits.TIME_MAX
    assert Memory("app", "ana", "s1", "fact", "t", expires_at=limits.TIME_MAX - 1).expires_at


def test_nan_in_state_is_refused_naming_the_key() -> None:
    with pytest.raises(EventError) as raised:
        Event(author="user", state_delta={"score": math.nan})
    assert raised.value.field == "state_delta.score"
    with pytest.raises(EventError) as raised:
        Event(author="user", state_delta={"user:deep": {"x": [1.0, math.inf]}})
    assert raised.value.field == "state_delta.user:deep"
    with pytest.raises(EventError) as raised:
        Event(
            author="user",
            type="tool_result",
            data={"name": "t", "call_id": "c", "response": {"p": math.nan}},
        )
    assert raised.value.field == "data.response"
    with pytest.raises(SessionError) as raised:
        Session("app", "ana", state={"k": math.inf})
    assert raised.value.field == "state.k"
    with pytest.raises(SessionError) as raised:
        Session.from_dict({**session_row("s1"), "state": '{"k": NaN}'})
    assert raised.value.field == "state.k"


def test_sqlite_store_refuses_nan_state_at_create(tmp_path: Path) -> None:
    from mnemoray.sessions.sqlite.store import SQLiteSessionStore

    store = SQLiteSessionStore(str(tmp_path / "s.db"))
    with pytest.raises(InvalidInput) as raised:
        store.create_session("app", "ana", "s1", state={"score": math.nan})
    assert (raised.value.field or "").startswith("state")
    with pytest.raises(InvalidInput) as raised:
        store.create_session("app", "ana", "s2", state={"user:score": math.inf})
    assert raised.value.field == "state.user:score"


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1e300", "-1e12"])
def test_http_bad_times_and_floats_are_422(bad: str) -> None:
    c = client_for()
    assert c.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    body = (
        '{"app_name":"app","user_id":"ana","events":[{"author":"u","text":"x",'
        f'"timestamp":{bad}}}]}}'
    )
    assert (
        error_of(c.post("/v1/sessions/s1/events", content=body, headers=JSON), 422)["field"]
        == "events[0].timestamp"
    )
    for name in ("event_time_start", "event_time_end", "expires_at"):
        body = f'{{"app_name":"app","user_id":"ana","memories":[{{"text":"x","{name}":{bad}}}]}}'
        err = error_of(c.post("/v1/memories", content=body, headers=JSON), 422)
        assert err["field"] == f"memories.0.{name}" or name in err["message"], err
    body = '{"app_name":"app","user_id":"ana","query":"x","filters":{"after":' + bad + "}}"
    assert error_of(c.post("/v1/recall", content=body, headers=JSON), 422)
    if bad in ("NaN", "Infinity", "-Infinity"):  # as a state value: not JSON
        body = (
            '{"app_name":"app","user_id":"ana","events":[{"author":"u","text":"x",'
            f'"state_delta":{{"score":{bad}}}}}]}}'
        )
        assert (
            error_of(c.post("/v1/sessions/s1/events", content=body, headers=JSON), 422)["field"]
            == "events[0].state_delta.score"
        )
        body = f'{{"app_name":"app","user_id":"ana","session_id":"s9","state":{{"k":{bad}}}}}'
        assert error_of(c.post("/v1/sessions", content=body, headers=JSON), 422)
    assert c.get("/v1/sessions/s1", params=WHO).json()["events"] == []


def test_archive_rows_with_bad_times_are_quarantined(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    (archive).mkdir()
    (archive / "a.jsonl").write_text(
        json.dumps(session_row("s1"))
        + "\n"
        + json.dumps(session_row("s2", timestamp=1e300))
        + "\n"
        + json.dumps(session_row("s3", timestamp=math.nan))
        + "\n"  # Python writes NaN
        + json.dumps({**session_row("s4"), "updated_at": -1e12})
        + "\n"
    )
    table = pa.Table.from_pylist(
        [
            {**session_row("p1"), "created_at": math.nan},
            {**session_row("p2"), "created_at": 1_700_000_000.0},
        ],
        schema=ARCHIVE_SCHEMA,
    )
    pq.write_table(table, archive / "b.parquet")
    rows = {r.location: r for r in iter_archive(archive)}
    assert [k for k, r in rows.items() if r.ok] == ["a.jsonl:1", "b.parquet:row 1"]
    assert "events[0].timestamp" in rows["a.jsonl:2"].error
    assert "events[0].timestamp" in rows["a.jsonl:3"].error
    assert "updated_at" in rows["a.jsonl:4"].error
    assert "created_at" in rows["b.parquet:row 0"].error


# -- 3. size limits ------------------------------------------------------------------------
def test_an_event_over_the_limit_is_payload_too_large() -> None:
    with pytest.raises(PayloadTooLarge) as raised:
        Event(author="user", text="x" * (limits.MAX_EVENT_BYTES + 1))
    assert raised.value.field == "text" and "MAX_EVENT_BYTES" in str(raised.value)
    with pytest.raises(PayloadTooLarge) as raised:
        Event(
            author="user",
            text="x" * (limits.MAX_EVENT_BYTES // 2),
            data={"blob": "y" * (limits.MAX_EVENT_BYTES // 2)},
        )
    assert "MAX_EVENT_BYTES" in str(raised.value)
    Event(author="user", text="x" * (limits.MAX_EVENT_BYTES - 1000))  # under it: fine


def test_a_session_over_the_limits_is_refused() -> None:
    events = [{"author": "u", "text": "x"}] * (limits.MAX_SESSION_EVENTS + 1)
    with pytest.raises(PayloadTooLarge) as raised:
        Session.from_dict({**WHO, "session_id": "s1", "events": events})
    assert raised.value.field == "events" and "MAX_SESSION_EVENTS" in str(raised.value)
    big = "x" * (limits.MAX_EVENT_BYTES - 100)
    events = [{"author": "u", "text": big}] * (limits.MAX_ROW_BYTES // len(big) + 1)
    with pytest.raises(PayloadTooLarge) as raised:
        Session.from_dict({**WHO, "session_id": "s1", "events": events})
    assert "MAX_ROW_BYTES" in str(raised.value)


def test_backfill_quarantines_a_few_mb_event_quickly_and_commits_the_rest(tmp_path: Path) -> None:
    archive = write_jsonl(
        tmp_path / "archive" / "a.jsonl",
        [session_row("s1"), session_row("s2", text="tulips " * 500_000), session_row("s3")],
    )
    t0 = time.perf_counter()
    report = run_backfill(archive, tmp_path / "store")
    took = time.perf_counter() - t0
    assert report.quarantined == 1 and report.sessions_committed == 2
    (q,) = MemoryStore(tmp_path / "store").read_quarantine()
    assert q["location"] == "a.jsonl:2" and "MAX_EVENT_BYTES" in q["reason"]
    assert "events[0].text" in q["reason"]
    assert took < 30, took


def test_an_oversize_row_is_quarantined_before_it_is_parsed(tmp_path: Path) -> None:
    huge = session_row("s2", text="x" * (limits.MAX_ROW_BYTES + 10))
    write_jsonl(tmp_path / "archive" / "a.jsonl", [session_row("s1"), huge, session_row("s3")])
    table = pa.Table.from_pylist(
        [session_row("p1"), huge, session_row("p3")], schema=ARCHIVE_SCHEMA
    )
    pq.write_table(table, tmp_path / "archive" / "b.parquet")
    rows = {r.location: r for r in iter_archive(tmp_path / "archive")}
    for where in ("a.jsonl:2", "b.parquet:row 1"):
        assert not rows[where].ok and "MAX_ROW_BYTES" in rows[where].error
        # The quarantine keeps the row's head, not megabytes of it.
        assert len(json.dumps(rows[where].raw)) < 10_000
    assert sorted(k for k, r in rows.items() if r.ok) == [
        "a.jsonl:1",
        "a.jsonl:3",
        "b.parquet:row 0",
        "b.parquet:row 2",
    ]
    report = run_backfill(tmp_path / "archive", tmp_path / "store")
    assert report.quarantined == 2 and report.sessions_committed == 4


def test_http_event_over_the_limit_is_413() -> None:
    c = client_for()
    assert c.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    r = c.post(
        "/v1/sessions/s1/events",
        json={**WHO, "events": [{"author": "u", "text": "x" * (limits.MAX_EVENT_BYTES + 1)}]},
    )
    err = error_of(r, 413)
    assert err["field"] == "events[0].text" and "MAX_EVENT_BYTES" in err["message"]


def test_http_appends_stop_at_the_session_limit() -> None:
    c = client_for()
    assert c.post("/v1/sessions", json={**WHO, "session_id": "s1"}).status_code == 201
    event = {"author": "u", "text": "x" * 1_000_000}  # under MAX_EVENT_BYTES
    fits = limits.MAX_ROW_BYTES // 1_000_000
    for _ in range(fits):
        assert c.post("/v1/sessions/s1/events", json={**WHO, "events": [event]}).status_code == 200
    err = error_of(c.post("/v1/sessions/s1/events", json={**WHO, "events": [event]}), 413)
    assert err["field"] == "events" and "MAX_ROW_BYTES" in err["message"]
    assert c.get("/v1/sessions/s1", params=WHO).json()["version"] == fits


def test_http_text_caps_come_from_the_limits_module() -> None:
    from mnemoray.schemas import common as schemas

    assert schemas.MAX_MEMORY_TEXT_CHARS == limits.MAX_MEMORY_TEXT_CHARS
    assert schemas.MAX_SESSION_EVENTS == limits.MAX_SESSION_EVENTS
    c = client_for()
    r = c.post(
        "/v1/memories",
        json={**WHO, "memories": [{"text": "x" * (limits.MAX_MEMORY_TEXT_CHARS + 1)}]},
    )
    assert error_of(r, 422)["field"] == "memories.0.text"


# -- 4. exposure: /docs --------------------------------------------------------------------
DOC_ROUTES = ("/docs", "/redoc", "/openapi.json")


def test_docs_are_closed_by_default_when_keys_are_on() -> None:
    c = client_for()
    for route in DOC_ROUTES:
        assert c.get(route).status_code == 404, route
        assert c.get(route, headers={"Authorization": ""}).status_code == 404, route
    assert c.get("/healthz").status_code == 200


def test_docs_open_when_asked_or_without_keys() -> None:
    for c in (client_for(docs=True), client_for(keys=False)):
        for route in DOC_ROUTES:
            assert c.get(route).status_code == 200, route
    assert client_for(keys=False, docs=False).get("/openapi.json").status_code == 404


def test_docs_setting_reaches_the_http_config(tmp_path: Path) -> None:
    from mnemoray.http.app import http_config

    keys = ApiKeys.from_mapping({KEY: "app"})
    closed = load_settings({"store": str(tmp_path)}, env={})
    assert closed.server.docs is None and http_config(closed.server, keys).docs is None
    assert not http_config(closed.server, keys).docs_open
    opened = load_settings({"store": str(tmp_path), "server.docs": "true"}, env={})
    assert http_config(opened.server, keys).docs_open
    assert http_config(closed.server, ApiKeys.none()).docs_open
    env = load_settings({"store": str(tmp_path)}, env={"MNEMORAY_SERVER__DOCS": "false"})
    assert env.server.docs is False


def test_docs_say_what_to_firewall() -> None:
    page = (Path(__file__).parents[2] / "docs" / "serving.md").read_text()
    section = page[page.index("## Exposure") :]
    section = section[: section.find("\n## ", 4)]
    for port in ("6379", "8265", "10001", "8000"):
        assert re.search(rf"\b{port}\b", section), port


@pytest.mark.parametrize(
    "make", [lambda: SQLiteSessionStore(":memory:"), InMemorySessionStore], ids=["sqlite", "memory"]
)
@pytest.mark.parametrize("value", ["\ud800", float("nan"), float("inf")])
def test_create_session_refuses_state_it_could_not_read_back(make, value) -> None:
    store = make()
    with pytest.raises(SessionError) as exc:
        store.create_session("app", "u", "s1", {"user:city": value})
    assert exc.value.field == "state.user:city"
    with pytest.raises(SessionNotFoundError):
        store.get_session("app", "u", "s1")  # nothing half-written
