"""The entity graph as part of the memory store: written in the memories' commit (backfill
and online ingest), forgotten with them, exported and imported with them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from mnemoray.backfill import BackfillConfig, backfill
from mnemoray.backfill.archive import write_archive
from mnemoray.errors import NotFound
from mnemoray.faults import CRASH_ENV, CRASH_EXIT_CODE
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.graph.parts import GRAPH_DIR, MAX_PARTS, listed_files
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.temporal import epoch

ROOT = Path(__file__).resolve().parents[2]


def conv(sid: str, day: date, *turns: tuple[str, str], user: str = "u1") -> Session:
    t = epoch(day) + 9 * 3600
    events = [
        Event(author=a, role="user", text=x, id=f"{sid}-{i}", timestamp=t + 60 * i)
        for i, (a, x) in enumerate(turns)
    ]
    return Session("app", user, session_id=sid, events=events, created_at=t)


SESSIONS = [
    conv(
        "s1",
        date(2023, 5, 8),
        ("Melanie", "Hi Caroline! I live in Berlin. My sister Anna lives in Boston."),
        ("Caroline", "Nice, Mel! I work at Acme Labs."),
    ),
    conv(
        "s2",
        date(2023, 9, 2),
        ("Melanie", "Big news: I moved to Paris last month!"),
        ("Caroline", "Wow Mel! We adopted a puppy named Max last Saturday."),
    ),
    conv(
        "s3",
        date(2023, 10, 1),
        ("Jon", "I work at Globex. My brother Sam lives in Denver."),
        user="u2",
    ),
    conv(
        "s4",
        date(2023, 10, 9),
        ("Melanie", "Anna visited me in Paris last week."),
        ("Caroline", "How lovely, Mel."),
    ),
    conv("s5", date(2023, 11, 3), ("Jon", "Sam moved to Austin in October."), user="u2"),
]


def archive(tmp: Path) -> Path:
    write_archive(SESSIONS, tmp / "archive" / "sessions.jsonl")
    return tmp / "archive"


def run_backfill(arch: Path, store: Path) -> None:
    backfill(
        BackfillConfig(arch, store, shards=2, embedder=None, commit_every=2, progress_interval_s=0)
    )


def graph_state(store: Path, app: str = "app") -> dict[str, object]:
    """What a graph holds, by id (ids are stable): comparable across stores."""
    snap = MemoryStore(store).load()
    out: dict[str, object] = {}
    for user in snap.graph.users(app):
        g = snap.graph.user(app, user)
        out[user] = (
            {(e.entity_id, e.name, e.type) for e in g.entities.values()},
            {(r.relation_id, r.type, r.valid_to) for r in g.relations.values()},
        )
    return out


def lives_in(
    service: MemoryService, user: str = "u1", who: str = "Mel", at: str | None = None
) -> list[tuple[str, float | None]]:
    answer = service.neighbours("app", user, who, depth=1, types=["lives_in"], at=at)
    names = {n.node_id: n.name for n in answer.neighbours}
    return sorted((names[f["dst"]], f["valid_to"]) for f in answer.facts)


def test_backfill_commits_graph_and_memories_together_and_a_rerun_adds_nothing(
    tmp_path: Path,
) -> None:
    arch, store = archive(tmp_path), tmp_path / "store"
    run_backfill(arch, store)
    m = MemoryStore(store).manifest()
    # Every part was listed by a commit that also published memories and ledger entries.
    seg_versions = {e.version for entries in m.segments for e in entries}
    parts = [p for shard in m.graph for p in shard]
    assert parts and {p.version for p in parts} <= seg_versions
    assert m.ledger_sessions == len(SESSIONS)
    snap = MemoryStore(store).load()
    mel = snap.graph.user("app", "u1")
    melanie = mel.find("Mel")
    assert melanie is not None and melanie.name == "Melanie"
    # mentions point at memories the same snapshot serves
    mems = {r.src for r in mel.relations.values() if r.type == "mentions"}
    assert mems and all(snap.get(i, ("app", "u1")) is not None for i in mems)
    # Each user's graph is theirs alone.
    assert snap.graph.user("app", "u2").find("Melanie") is None
    assert snap.graph.user("app", "u2").find("Jon") is not None
    # The app's index joins its users' relations; a user's holds theirs only.
    users = [snap.graph.user("app", u) for u in ("u1", "u2")]
    assert snap.graph.index("app").relation_count == sum(len(g.relations) for g in users)
    assert snap.graph.index("app", "u1").relation_count == len(mel.relations)
    near = snap.graph.index("app", "u1").neighbours(melanie.entity_id, depth=1).ids()
    assert set(near) <= set(mel.entities) | mems

    before, state = m, graph_state(store)
    run_backfill(arch, store)
    after = MemoryStore(store).manifest()
    assert after.version == before.version and after.graph == before.graph
    assert graph_state(store) == state


@pytest.mark.slow  # a real process killed, then run again (subprocesses)
@pytest.mark.parametrize("point", ["graph-commit:2", "prepare:2"])
def test_a_backfill_killed_before_its_commit_leaves_neither_and_resumes(
    tmp_path: Path, point: str
) -> None:
    arch, store = archive(tmp_path), tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    cmd = [
        sys.executable,
        "-m",
        "mnemoray.cli",
        "backfill",
        "--archive",
        str(arch),
        "--store",
        str(store),
        "--in-process",
        "--embedder",
        "none",
        "--shards",
        "2",
        "--commit-every",
        "2",
        "--progress-every",
        "0",
    ]
    died = subprocess.run(
        cmd,
        cwd=ROOT,
        env={**env, CRASH_ENV: point, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert died.returncode == CRASH_EXIT_CODE, died.stdout + died.stderr
    m = MemoryStore(store).manifest()
    assert m.version == 1 and m.ledger_sessions == 2  # the first chunk only
    snap = MemoryStore(store).load()
    # s1, s2 committed (memories and graph); s3, s4 of the killed chunk: neither.
    sessions = {mem.session_id for mem in snap.iter_memories()}
    assert sessions == {"s1", "s2"}
    assert snap.graph.users("app") == ["u1"]
    assert {s for r in snap.graph.user("app", "u1").relations.values() for s in r.session_ids} == {
        "s1",
        "s2",
    }
    on_disk = set((store / GRAPH_DIR).rglob("*.parquet"))
    if point.startswith("graph-commit"):
        assert on_disk - listed_files(store, m)  # the killed commit's parts: unlisted

    done = subprocess.run(
        cmd,
        cwd=ROOT,
        env={**env, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    clean = tmp_path / "clean"
    run_backfill(arch, clean)
    assert graph_state(store) == graph_state(clean)
    store_obj = MemoryStore(store)
    store_obj.gc()
    left = set((store / GRAPH_DIR).rglob("*.parquet"))
    assert left == listed_files(store, store_obj.manifest())


@pytest.fixture
def service(tmp_path: Path):
    svc = MemoryService.open(tmp_path / "store", embedder=None, shards=2)
    yield svc
    svc.close()


def test_online_ingest_updates_the_graph_and_forget_session_undoes_it(service) -> None:
    service.ingest_session(SESSIONS[0])
    assert lives_in(service) == [("Berlin", None)]
    service.ingest_session(SESSIONS[1])
    moved = lives_in(service)
    assert [name for name, _ in moved] == ["Paris"]
    # The past is still there: Berlin held in June, closed when Paris began.
    assert lives_in(service, at="2023-06-15") == [("Berlin", epoch(date(2023, 8, 1)))]
    # An ingest that changes nothing writes nothing.
    version = service.store.manifest().version
    assert service.ingest_session(SESSIONS[1]).status == "unchanged"
    assert service.store.manifest().version == version

    assert service.forget_session("app", "u1", "s2") > 0
    assert lives_in(service) == [("Berlin", None)]  # reopened: s2 alone said Paris
    graph = service.graph("app", "u1")
    assert "s2" not in graph.sessions()
    assert graph.find("Max") is None  # said in s2 only
    assert graph.find("Anna") is not None  # said in s1


def test_forget_user_and_forgetting_a_memory(service) -> None:
    for s in SESSIONS:
        service.ingest_session(s)
    graph = service.graph("app", "u1")
    mentioned = sorted({r.src for r in graph.relations.values() if r.type == "mentions"})
    service.forget_memory("app", "u1", mentioned[0])
    after = service.graph("app", "u1")
    assert all(mentioned[0] not in (r.src, r.dst) for r in after.relations.values())
    assert len(after.entities) == len(graph.entities)

    assert service.forget_user("app", "u1") > 0
    with pytest.raises(NotFound, match="has no entity graph"):
        service.neighbours("app", "u1", "Melanie")
    assert service.graph("app", "u1").entities == {}
    assert service.graph("app", "u2").find("Jon") is not None  # another user: untouched


def test_parts_are_merged_and_the_graph_survives(service) -> None:
    for i in range(MAX_PARTS + 3):
        service.ingest_session(
            conv(
                f"x{i}",
                date(2023, 1, 1 + i),
                ("Melanie", f"I visited Lisbon with Caroline, day {i}."),
            )
        )
    m = service.store.manifest()
    assert all(len(parts) < MAX_PARTS for parts in m.graph)
    # The parts a merge replaced are removed once it is committed.
    assert set((service.store.root / GRAPH_DIR).rglob("*.parquet")) == listed_files(
        service.store.root, m
    )
    graph = service.graph("app", "u1")
    assert {f"x{i}" for i in range(MAX_PARTS + 3)} <= graph.sessions()
    assert graph.find("Lisbon") is not None


def test_export_import_carries_the_graph(tmp_path: Path, service) -> None:
    for s in SESSIONS:
        service.ingest_session(s)
    out = tmp_path / "export.jsonl"
    service.store.export_jsonl(out)
    kinds = {json.loads(line).get("table") for line in out.read_text().splitlines()[1:]}
    assert kinds == {None, "entities", "aliases", "relations"}
    target = MemoryStore(tmp_path / "copy", shards=3)  # another sharding
    target.import_jsonl(out)
    assert graph_state(tmp_path / "copy") == graph_state(tmp_path / "store")
    version = target.manifest().version
    assert version == 1  # the memories and the graph in one commit
    target.import_jsonl(out)  # again: nothing new
    assert target.manifest().version == version
    assert graph_state(tmp_path / "copy") == graph_state(tmp_path / "store")


def test_a_session_the_extractor_fails_on_keeps_its_memories(
    service, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemoray.memory.store.graph import commit as graph_commit

    def broken(session, memories):
        raise RuntimeError("extractor bug")

    service.ingest_session(SESSIONS[0])
    monkeypatch.setattr(graph_commit, "extract_session", broken)
    assert service.ingest_session(SESSIONS[1]).added  # the memories are committed
    assert {m.session_id for m in service.snapshot().rows_for_user("app", "u1")} == {"s1", "s2"}
    assert service.graph("app", "u1").sessions() == {"s1"}  # the graph lacks s2 only


def test_a_session_the_merge_fails_on_is_left_out_of_the_graph_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemoray.graph.graph import UserGraph

    real = UserGraph.add_session

    def failing(self, ex):
        if ex.session_id == "s2":
            real(self, ex)  # half-applied, then fails: the commit must not keep any of it
            raise RuntimeError("merge bug")
        return real(self, ex)

    monkeypatch.setattr(UserGraph, "add_session", failing)
    arch, store = archive(tmp_path), tmp_path / "store"
    run_backfill(arch, store)
    snap = MemoryStore(store).load()
    assert {m.session_id for m in snap.iter_memories()} == {s.session_id for s in SESSIONS}
    assert snap.graph.user("app", "u1").sessions() == {"s1", "s4"}
    assert snap.graph.user("app", "u1").find("Max") is None  # said in s2 only
