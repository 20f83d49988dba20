"""A session replayed to an earlier event (``at_event_id`` on compile): the state it had then,
creation state included, and only the artifacts its kept events recorded."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mnemoray.artifacts.store import ArtifactNotFoundError, InMemoryArtifactStore
from mnemoray.artifacts.view import ArtifactsAt, ReadOnlyArtifacts
from mnemoray.compiler import AgentSpec, Compiler, Services
from mnemoray.compiler.replay import replay, session_at
from mnemoray.errors import NotFound
from mnemoray.http.app import build_api
from mnemoray.http.local_backend import LocalBackend
from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.sqlite.rows import SCHEMA_VERSION
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.sessions.store import InMemorySessionStore, SessionStore
from mnemoray.sessions.types import SessionNotFoundError
from tests.support.ui_fixtures import ANA, ANA_SESSION, ARTIFACT, UiStore, build_ui_store
from tests.support.ui_fixtures import APP as UI_APP

APP, USER = "demo_app", "ana"


@pytest.fixture
def store(any_session_store: SessionStore) -> SessionStore:
    return any_session_store  # every SessionStore (tests/conftest.py)


def two_sessions(store: SessionStore) -> tuple[str, str]:
    """The reviewer's case: s0 sets user:name at creation, s1 starts calm, then s1's second
    event makes it angry and renames the user. Returns (e1, e2)."""
    store.create_session(APP, USER, "s0", state={"user:name": "Ana"})
    s1 = store.create_session(APP, USER, "s1", state={"mood": "calm"})
    e1 = store.append_event(s1, user_message("hello", timestamp=100.0))
    e2 = store.append_event(
        s1,
        model_message(
            "agent", "hi", timestamp=101.0, state_delta={"mood": "angry", "user:name": "Bob"}
        ),
    )
    return e1.id, e2.id


# -- the creation state, kept by every store -------------------------------------------------
def test_store_keeps_the_state_a_session_was_created_with(store: SessionStore) -> None:
    two_sessions(store)
    # All scopes as the session saw them when created: s0's user:name was there already.
    assert store.created_state(APP, USER, "s1") == {"mood": "calm", "user:name": "Ana"}
    assert store.created_state(APP, USER, "s0") == {"user:name": "Ana"}
    assert store.get_session(APP, USER, "s1").state == {"mood": "angry", "user:name": "Bob"}
    store.delete_session(APP, USER, "s1")
    with pytest.raises(SessionNotFoundError):
        store.created_state(APP, USER, "s1")


def test_session_at_restores_creation_state_and_other_sessions_user_state(
    store: SessionStore,
) -> None:
    e1, e2 = two_sessions(store)
    s1 = store.get_session(APP, USER, "s1")
    created = store.created_state(APP, USER, "s1")
    assert session_at(s1, e1, created_state=created).state == {"mood": "calm", "user:name": "Ana"}
    assert session_at(s1, e2, created_state=created).state == s1.state
    got, _ = replay(store, s1, e1, Services())
    assert got.state == {"mood": "calm", "user:name": "Ana"} and len(got.events) == 1


def test_keys_first_set_later_are_left_out_and_kept_events_win(store: SessionStore) -> None:
    s = store.create_session(APP, USER, "s", state={"mood": "calm", "app:theme": "dark"})
    e1 = store.append_event(s, user_message("a", timestamp=1.0, state_delta={"mood": "ok"}))
    store.append_event(
        s,
        user_message(
            "b",
            timestamp=2.0,
            state_delta={
                "mood": "sad",
                "topic": "parrots",
                "user:pet": "Kiwi",
                "app:theme": "light",
            },
        ),
    )
    got, _ = replay(store, store.get_session(APP, USER, "s"), e1.id, Services())
    # mood: the kept event's value; app:theme: the creation value; topic and user:pet did
    # not exist when the session began and only a later event set them.
    assert got.state == {"mood": "ok", "app:theme": "dark"}


def test_unknown_event_is_not_found_naming_the_field(store: SessionStore) -> None:
    two_sessions(store)
    with pytest.raises(NotFound) as err:
        replay(store, store.get_session(APP, USER, "s1"), "nope", Services())
    assert err.value.field == "at_event_id"


# -- a store file from before the creation state was kept -------------------------------------
V1_SESSIONS = """CREATE TABLE sessions (
    app_name TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    state TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, ended_at REAL,
    version INTEGER NOT NULL, PRIMARY KEY (app_name, user_id, session_id))"""


def v1_file(path: Path) -> None:
    """A version-1 file (as mnemoray wrote it before version 2) holding one session whose
    second event changed mood and user:name."""
    conn = sqlite3.connect(path)
    conn.execute(V1_SESSIONS)
    conn.execute("""CREATE TABLE events (app_name TEXT NOT NULL, user_id TEXT NOT NULL,
        session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL,
        body TEXT NOT NULL, PRIMARY KEY (app_name, user_id, session_id, seq),
        UNIQUE (app_name, user_id, session_id, event_id))""")
    conn.execute("""CREATE TABLE app_state (app_name TEXT NOT NULL, key TEXT NOT NULL,
        value TEXT NOT NULL, PRIMARY KEY (app_name, key))""")
    conn.execute("""CREATE TABLE user_state (app_name TEXT NOT NULL, user_id TEXT NOT NULL,
        key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (app_name, user_id, key))""")
    events = [
        user_message("hello", timestamp=100.0),
        model_message(
            "agent", "hi", timestamp=101.0, state_delta={"mood": "angry", "user:name": "Bob"}
        ),
    ]
    conn.execute(
        "INSERT INTO sessions VALUES (?, ?, 'old', ?, 99.0, 101.0, NULL, 2)",
        (APP, USER, json.dumps({"mood": "angry"})),
    )
    conn.executemany(
        "INSERT INTO events VALUES (?, ?, 'old', ?, ?, ?)",
        [(APP, USER, i, e.id, json.dumps(e.to_dict())) for i, e in enumerate(events)],
    )
    conn.execute("INSERT INTO user_state VALUES (?, ?, 'user:name', '\"Bob\"')", (APP, USER))
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_a_version_1_file_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    v1_file(path)
    with SQLiteSessionStore(path) as store:
        old = store.get_session(APP, USER, "old")
        assert store.created_state(APP, USER, "old") is None  # not known for it
        # Without a creation state, a key no kept event set is left out: not shown with
        # the value a later event gave it.
        got, _ = replay(store, old, old.events[0].id, Services())
        assert got.state == {}
        # New sessions in the migrated file keep theirs.
        store.create_session(APP, USER, "new", state={"mood": "calm"})
        assert store.created_state(APP, USER, "new") == {"mood": "calm", "user:name": "Bob"}
    with SQLiteSessionStore(path) as store:  # opening again changes nothing
        assert store.created_state(APP, USER, "new") == {"mood": "calm", "user:name": "Bob"}
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteSessionStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="schema version"):
        SQLiteSessionStore(path)


# -- the artifacts a replayed compile sees ---------------------------------------------------
def session_with_artifacts(
    store: SessionStore, artifacts: InMemoryArtifactStore
) -> tuple[str, str]:
    """notes.md v0 recorded by e1; notes.md v1 and plan.md v0 by e2; a user: artifact saved
    by another session, and a payload nobody recorded. Returns (e1, e2)."""
    s = store.create_session(APP, USER, "s")
    v0 = artifacts.save(APP, USER, "s", "notes.md", "seeds only", summary="care v0")
    e1 = store.append_event(
        s, model_message("agent", "noted", timestamp=1.0, artifact_delta={"notes.md": v0})
    )
    v1 = artifacts.save(APP, USER, "s", "notes.md", "seeds and apples", summary="care v1")
    plan = artifacts.save(APP, USER, "s", "plan.md", "vet on Monday")
    e2 = store.append_event(
        s,
        model_message(
            "agent", "updated", timestamp=2.0, artifact_delta={"notes.md": v1, "plan.md": plan}
        ),
    )
    artifacts.save(APP, USER, "other", "user:diet.md", "fruit")
    artifacts.save(APP, USER, "s", "scratch.txt", "unrecorded")
    return e1.id, e2.id


def test_a_replayed_compile_sees_the_artifacts_of_its_time(store: SessionStore) -> None:
    artifacts = InMemoryArtifactStore()
    e1, e2 = session_with_artifacts(store, artifacts)
    session = store.get_session(APP, USER, "s")
    agent = AgentSpec(
        name="agent", instruction="Care sheet: {artifact.notes.md}", memory_tools=["load_artifacts"]
    )

    def compiled(at: str | None) -> str:
        services = Services(artifacts=artifacts)
        s = session
        if at is not None:
            s, services = replay(store, session, at, services)
        return Compiler.default().compile(s, agent, services=services).system_instruction

    now, at_e1, at_e2 = compiled(None), compiled(e1), compiled(e2)
    assert "Care sheet: seeds and apples" in now and "plan.md" in now and "scratch.txt" in now
    assert "Care sheet: seeds only" in at_e1
    assert "notes.md@0 " in at_e1 and "notes.md@1" not in at_e1
    assert all(n not in at_e1 for n in ("plan.md", "user:diet.md", "scratch.txt"))
    assert "Care sheet: seeds and apples" in at_e2 and "notes.md@1 " in at_e2
    assert "plan.md@0 " in at_e2 and "scratch.txt" not in at_e2


def test_the_artifact_view_reads_only_its_time_and_refuses_writes() -> None:
    artifacts = InMemoryArtifactStore()
    sessions = InMemorySessionStore()
    e1, _ = session_with_artifacts(sessions, artifacts)
    _, services = replay(
        sessions, sessions.get_session(APP, USER, "s"), e1, Services(artifacts=artifacts)
    )
    view = services.artifacts
    assert isinstance(view, ArtifactsAt)
    assert view.list_names(APP, USER, "s") == ["notes.md"]
    assert view.list_versions(APP, USER, "s", "notes.md") == [0]
    assert view.load(APP, USER, "s", "notes.md").text() == "seeds only"
    assert view.describe(APP, USER, "s", "notes.md").version == 0
    for version in (1, None):  # a later version, a later name: not there yet
        with pytest.raises(ArtifactNotFoundError):
            view.load(APP, USER, "s", "notes.md" if version else "plan.md", version)
    # Another session, user or app: nothing, though the name matches.
    assert view.list_names(APP, USER, "other") == [] and view.list_names(APP, "ben", "s") == []
    with pytest.raises(ArtifactNotFoundError):
        view.load(APP, "ben", "s", "notes.md")
    for write in (
        lambda: view.save(APP, USER, "s", "notes.md", "edited"),
        lambda: view.delete(APP, USER, "s", "notes.md"),
        lambda: view.delete_version(APP, USER, "s", "notes.md", 0),
    ):
        with pytest.raises(ReadOnlyArtifacts) as err:
            write()
        assert err.value.status == 409
    assert artifacts.list_versions(APP, USER, "s", "notes.md") == [0, 1]  # untouched
    # A recorded version deleted since: the highest older one left is shown.
    artifacts.save(APP, USER, "s", "notes.md", "v2")
    _, later = replay(
        sessions,
        sessions.get_session(APP, USER, "s"),
        sessions.get_session(APP, USER, "s").events[-1].id,
        Services(artifacts=artifacts),
    )
    artifacts.delete_version(APP, USER, "s", "notes.md", 1)
    assert later.artifacts is not None
    assert later.artifacts.load(APP, USER, "s", "notes.md").text() == "seeds only"


def test_no_artifact_store_stays_none(store: SessionStore) -> None:
    e1, _ = two_sessions(store)
    _, services = replay(store, store.get_session(APP, USER, "s1"), e1, Services())
    assert services.artifacts is None


# -- over HTTP: ReplicaParts.compile goes through replay() ------------------------------------
@pytest.fixture(scope="module")
def ui_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UiStore, TestClient]]:
    store = build_ui_store(tmp_path_factory.mktemp("ui") / "store")
    backend = LocalBackend.open(str(store.store))
    yield (
        store,
        TestClient(
            build_api(backend), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000)
        ),
    )
    backend.close()


def test_compile_at_an_earlier_event_over_http(ui_http: tuple[UiStore, TestClient]) -> None:
    store, client = ui_http
    agent = {
        "name": "parrot_agent",
        "instruction": "Owner {user:name?}; pet {user:pet?}; mood {mood?}; "
        "topic {app:last_topic?}.",
        "memory_tools": ["load_artifacts"],
    }
    body = {"app_name": UI_APP, "user_id": ANA, "session_id": ANA_SESSION, "agent": agent}
    now = client.post("/v1/context:compile", json=body).json()
    first = client.post(
        "/v1/context:compile", json={**body, "at_event_id": store.user_turn_ids[0]}
    ).json()
    assert (
        "Owner Ana; pet Kiwi the parrot; mood happy; topic parrot care."
        in now["system_instruction"]
    )
    assert "Owner Ana; pet Kiwi the parrot; mood ; topic ." in first["system_instruction"]
    assert f"{ARTIFACT}@1" in now["system_instruction"]
    assert ARTIFACT not in first["system_instruction"]  # v1 was recorded by a later event
