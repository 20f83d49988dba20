"""A small real store for the memory inspector's tests (API and browser): app
``demo_app`` with users ``ana`` (her parrot Kiwi; a session with state changes, a
compaction event and an artifact with two versions) and ``ben`` (other memories).

Everything is written through the public APIs (session store, artifact store,
``MemoryService.add_session``), keyword-only (no model to load), into one folder
laid out as ``mnemoray ui --store DIR`` reads it by default: the memory store in
``DIR``, ``DIR/sessions.db``, ``DIR/artifacts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mnemoray.artifacts.files import FileArtifactStore
from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from mnemoray.summarizers import get_summarizer

APP = "demo_app"
ANA, BEN = "ana", "ben"
ANA_SESSION, ANA_PLANS, BEN_SESSION = "ana-parrot", "ana-plans", "ben-bikes"
ARTIFACT = "care-sheet.md"
# 2026-01-05 and 2026-02-10 (UTC): the sessions' event times, far apart for time filters.
T_PARROT, T_PLANS, T_BEN = 1_767_600_000.0, 1_770_700_000.0, 1_768_000_000.0


@dataclass
class UiStore:
    """Where the fixture lies, and the ids a test looks for."""

    root: Path
    app_name: str = APP
    users: tuple[str, ...] = (ANA, BEN)
    session_id: str = ANA_SESSION  # ana's long session (state, compaction, artifact)
    artifact: str = ARTIFACT
    event_ids: list[str] = field(default_factory=list)  # of ana's session, in order
    user_turn_ids: list[str] = field(default_factory=list)  # its user messages' ids
    memory_ids: dict[str, list[str]] = field(default_factory=dict)  # user -> ids

    @property
    def store(self) -> Path:
        return self.root

    @property
    def sessions_db(self) -> Path:
        return self.root / "sessions.db"

    @property
    def artifacts_dir(self) -> Path:
        return self.root / "artifacts"


def _ana_parrot(sessions: SQLiteSessionStore, artifacts: FileArtifactStore, out: UiStore) -> None:
    session = sessions.create_session(APP, ANA, ANA_SESSION, state={"user:name": "Ana"})
    config = CompactionConfig(interval=2, overlap=0, keep_last=1)
    compactor = Compactor(get_summarizer("extractive"), config)
    ts = T_PARROT
    v0 = artifacts.save(
        APP,
        ANA,
        ANA_SESSION,
        ARTIFACT,
        "# Kiwi\n- seeds\n",
        mime_type="text/markdown",
        summary="How to care for Kiwi",
    )
    turns = [
        (
            "I adopted a parrot named Kiwi, an African Grey who loves sunflower seeds.",
            {"user:pet": "Kiwi the parrot"},
            "Congratulations on adopting Kiwi!",
        ),
        (
            "Kiwi says hello every morning and hates the vacuum cleaner.",
            {"mood": "happy"},
            "Parrots often mimic greetings; Kiwi sounds clever.",
        ),
        ("What fruit can Kiwi eat safely?", {}, None),
        (
            "Please add apples to Kiwi's care sheet.",
            {"app:last_topic": "parrot care"},
            "Added apples to the care sheet.",
        ),
    ]
    for i, (text, delta, reply) in enumerate(turns):
        inv = f"inv-{i}"
        ts += 60.0
        ev = sessions.append_event(
            session, user_message(text, invocation_id=inv, timestamp=ts, state_delta=delta)
        )
        out.user_turn_ids.append(ev.id)
        if reply is None:  # a tool call and its result: the fruit list
            call = tool_call(
                "parrot_agent",
                "safe_fruits",
                {"animal": "parrot"},
                invocation_id=inv,
                timestamp=ts + 1,
            )
            sessions.append_event(session, call)
            sessions.append_event(
                session,
                tool_result(
                    "parrot_agent",
                    "safe_fruits",
                    {"fruits": ["apple", "banana", "mango"]},
                    call.data["call_id"],
                    invocation_id=inv,
                    timestamp=ts + 2,
                ),
            )
            reply = "Kiwi can eat apple, banana and mango (no avocado)."
        if i == 3:
            version = artifacts.save(
                APP,
                ANA,
                ANA_SESSION,
                ARTIFACT,
                "# Kiwi\n- seeds\n- apples\n",
                mime_type="text/markdown",
                summary="How to care for Kiwi",
            )
            assert version == v0 + 1
            sessions.append_event(
                session,
                model_message(
                    "parrot_agent",
                    reply,
                    invocation_id=inv,
                    timestamp=ts + 3,
                    artifact_delta={ARTIFACT: version},
                ),
            )
        else:
            sessions.append_event(
                session, model_message("parrot_agent", reply, invocation_id=inv, timestamp=ts + 3)
            )
        compactor.maybe_compact(sessions, session)
    session = sessions.get_session(APP, ANA, ANA_SESSION)
    if not any(e.type == "compaction" for e in session.events):
        raise AssertionError("the fixture session has no compaction event")
    out.event_ids = [e.id for e in session.events]


def _simple(
    sessions: SQLiteSessionStore, user: str, sid: str, ts: float, lines: list[tuple[str, str]]
) -> None:
    session = sessions.create_session(APP, user, sid)
    for i, (text, reply) in enumerate(lines):
        inv = f"inv-{i}"
        sessions.append_event(session, user_message(text, invocation_id=inv, timestamp=ts + 60 * i))
        sessions.append_event(
            session, model_message("assistant", reply, invocation_id=inv, timestamp=ts + 60 * i + 5)
        )


def build_ui_store(root: Path) -> UiStore:
    """Write the fixture under ``root`` (created) and return where it lies."""
    root.mkdir(parents=True, exist_ok=True)
    out = UiStore(root)
    sessions = SQLiteSessionStore(out.sessions_db)
    artifacts = FileArtifactStore(out.artifacts_dir)
    _ana_parrot(sessions, artifacts, out)
    _simple(
        sessions,
        ANA,
        ANA_PLANS,
        T_PLANS,
        [
            ("I am planning a trip to Lisbon in May.", "Lisbon in May is lovely."),
            ("Book a window seat for the flight to Lisbon.", "Window seat noted."),
        ],
    )
    _simple(
        sessions,
        BEN,
        BEN_SESSION,
        T_BEN,
        [
            ("I ride a red road bike to work every day.", "Cycling to work is great."),
            ("My bike needs new brake pads.", "Worth fixing soon."),
        ],
    )
    service = MemoryService.open(root, embedder=None)
    try:
        for user, sid in ((ANA, ANA_SESSION), (ANA, ANA_PLANS), (BEN, BEN_SESSION)):
            added = service.add_session(sessions.get_session(APP, user, sid))
            out.memory_ids.setdefault(user, []).extend(m.memory_id for m in added)
    finally:
        service.close()
        sessions.close()
    return out


__all__ = [
    "ANA",
    "ANA_PLANS",
    "ANA_SESSION",
    "APP",
    "ARTIFACT",
    "BEN",
    "BEN_SESSION",
    "UiStore",
    "build_ui_store",
]


def damage_shard_of(store: Path, user: str) -> int:
    """Overwrite the user's shard's segment files with garbage: that shard is damaged."""
    from mnemoray.memory.store.layout import shard_dir, shard_of
    from mnemoray.memory.store.manifest import read_manifest

    manifest = read_manifest(store)
    assert manifest is not None
    shard = shard_of(APP, user, manifest.shards)
    files = list((store / "memories" / shard_dir(shard)).glob("*.parquet"))
    assert files
    for f in files:
        f.write_bytes(b"not parquet")
    return shard
