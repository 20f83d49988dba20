"""The graph's Parquet tables: round trip, sharded like the memories, one generation per
write published by one rename, other users of a shard untouched, forgetting through the
store, and the traversal index read straight from the relation columns."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq

from mnemoray.graph import UserGraph, extract_session
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.store.graph.tables import (
    CURRENT,
    GRAPH_DIR,
    SCHEMAS,
    GraphStore,
    graph_from_tables,
    shard_tables,
)
from mnemoray.memory.store.layout import shard_dir, shard_of
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.temporal import epoch


def conv(sid: str, day: date, *turns: tuple[str, str], user: str = "u1") -> Session:
    t = epoch(day) + 9 * 3600
    events = [
        Event(author=a, role="user", text=x, id=f"{sid}-{i}", session_id=sid, timestamp=t + 60 * i)
        for i, (a, x) in enumerate(turns)
    ]
    return Session("app", user, session_id=sid, events=events, created_at=t)


def graph(user: str = "u1") -> UserGraph:
    g = UserGraph("app", user)
    for s in (
        conv(
            "s1",
            date(2023, 5, 8),
            ("Melanie", "I live in Berlin. My sister Anna lives in Boston."),
            ("Caroline", "Hi Mel!"),
            user=user,
        ),
        conv("s2", date(2023, 9, 2), ("Melanie", "I moved to Paris last month."), user=user),
    ):
        memories = distill_session(s, None, summarize=False, chunk_turns=2, now=0)
        g.add_session(extract_session(s, memories, recorded_at=1.0))
    return g


def test_round_trip_keeps_every_record(tmp_path: Path) -> None:
    g = graph()
    store = GraphStore(tmp_path, shards=4)
    written = store.save(g)
    assert {p.name.split("-")[0] for p in written} == {"entities", "aliases", "relations"}
    back = store.load("app", "u1")
    assert back.entities == g.entities and back.aliases == g.aliases
    assert back.relations == g.relations
    # The loaded graph resolves and answers like the one saved.
    assert back.find("Mel") == g.find("Mel")


def test_rows_live_in_the_memory_shard_of_the_user(tmp_path: Path) -> None:
    store = GraphStore(tmp_path, shards=8)
    store.save(graph("u1"))
    shard = shard_of("app", "u1", 8)
    folders = [p.name for p in (tmp_path / GRAPH_DIR).iterdir() if p.is_dir()]
    assert folders == [shard_dir(shard)]
    current = json.loads((tmp_path / GRAPH_DIR / shard_dir(shard) / CURRENT).read_text())
    table = pq.read_table(tmp_path / GRAPH_DIR / shard_dir(shard) / current["files"]["relations"])
    assert table.schema.equals(SCHEMAS["relations"])
    assert set(table["user_id"].to_pylist()) == {"u1"}


def test_saving_one_user_keeps_the_others_of_the_shard(tmp_path: Path) -> None:
    store = GraphStore(tmp_path, shards=1)
    a, b = graph("u1"), graph("u2")
    store.save(a, b)
    a.forget_session("s2")
    store.save(a)
    assert store.load("app", "u2").relations == b.relations
    assert store.load("app", "u1").relations == a.relations
    assert store.load("app", "nobody").entities == {}


def test_each_write_is_a_new_generation_and_one_before_is_kept(tmp_path: Path) -> None:
    store = GraphStore(tmp_path, shards=1)
    g = graph()
    folder = tmp_path / GRAPH_DIR / shard_dir(0)
    generations = []
    for _ in range(3):
        store.save(g)
        generations.append(json.loads((folder / CURRENT).read_text())["generation"])
    assert len(set(generations)) == 3
    on_disk = {p.stem.partition("-")[2] for p in folder.glob("*.parquet")}
    assert on_disk == set(generations[-2:])
    assert not list(folder.glob(".*.tmp"))


def test_forgetting_through_the_store(tmp_path: Path) -> None:
    store = GraphStore(tmp_path, shards=2)
    store.save(graph())
    assert store.forget_session("app", "u1", "s2") is True
    back = store.load("app", "u1")
    assert back.sessions() == {"s1"}
    assert "Paris" not in {e.name for e in back.entities.values()}
    assert store.forget_session("app", "u1", "s2") is False


def test_row_format_on_its_own(tmp_path: Path) -> None:
    g = graph()
    tables = shard_tables([g, graph("u2")])
    assert tables["entities"].num_rows == 2 * len(g.entities)
    back = graph_from_tables("app", "u1", tables)
    assert back.relations == g.relations


def test_traversal_index_from_the_stored_columns(tmp_path: Path) -> None:
    g = graph()
    store = GraphStore(tmp_path, shards=3)
    store.save(g, graph("u2"))
    index = store.load_index("app", "u1")
    assert index.relation_count == len(g.relations)
    mel = g.find("Melanie")
    assert mel is not None
    near = index.neighbours(mel.entity_id, depth=1, types=["lives_in"])
    assert {g.entities[i].name for i in near.ids()} == {"Berlin", "Paris"}
    sept = epoch(date(2023, 9, 15))
    now = index.neighbours(mel.entity_id, depth=1, types=["lives_in"], at=sept)
    assert [g.entities[i].name for i in now.ids()] == ["Paris"]
    everyone = store.load_index("app")
    assert everyone.relation_count == 2 * len(g.relations)
