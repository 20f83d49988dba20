"""Closing superseded facts and deriving memory relations per session merged redo only
what the session changed (``mnemoray.graph.relations``, once a graph switched to them),
with the graph of the full recomputation after every session:
the same relations in the same order, with the same validity, versions and derived
relations, the same entities and aliases. The reference is a graph on a plain dict, where
both passes and the restated-fact lookup go over every relation, as before."""

from __future__ import annotations

import pickle
import random
from datetime import date

import pytest

import mnemoray.graph.graph as graph_module
from benchmarks.datagen import DatasetConfig, generate
from mnemoray.graph import UserGraph, extract_session
from mnemoray.graph.extract import SessionExtract
from mnemoray.graph.model import CONTRADICTS, DERIVED, EXTENDS, FUNCTIONAL, Relation
from mnemoray.graph.relations import STATED, Relations
from mnemoray.graph.validity import close_superseded, derive
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.store.graph.tables import graph_from_tables, shard_tables
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.summarizers import get_summarizer
from mnemoray.temporal import epoch

APP, USER = "app", "u1"


@pytest.fixture(autouse=True)
def _log_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphs switch to the logged passes after two sessions, whatever their size (the
    graphs here are smaller than the switch's size in use)."""
    monkeypatch.setattr(graph_module, "FULL_PASSES", 2)
    monkeypatch.setattr(graph_module, "INDEXED_RELATIONS", 0)


class Full(UserGraph):
    """The reference: relations in a plain dict, so every pass is over all of them."""

    @property  # type: ignore[override]
    def relations(self) -> dict[str, Relation]:
        return self._relations

    @relations.setter
    def relations(self, relations: dict[str, Relation]) -> None:
        self._relations = dict(relations)  # type: ignore[assignment]


def conv(sid: str, day: date, *texts: str) -> Session:
    t = epoch(day) + 9 * 3600
    events = [
        Event(
            author="Melanie" if i % 2 == 0 else "Caroline",
            role="user",
            text=x,
            id=f"{sid}-{i}",
            session_id=sid,
            timestamp=t + 60 * i,
        )
        for i, x in enumerate(texts)
    ]
    return Session(APP, USER, session_id=sid, events=events, created_at=t)


CITIES = ("Berlin", "Paris", "Lisbon", "Oslo", "Rome")
JOBS = ("Acme Labs", "Globex", "Initech")


def life(n: int, seed: int) -> list[Session]:
    """A user who moves, changes jobs, restates facts, says what ended, moves back."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        day = date(2020 + i // 12, i % 12 + 1, rng.randint(1, 28))
        said = rng.choice(
            [
                f"I live in {rng.choice(CITIES)}.",
                f"I moved to {rng.choice(CITIES)} last month!",
                f"I still live in {rng.choice(CITIES)}.",
                f"I work at {rng.choice(JOBS)}.",
                f"I used to work at {rng.choice(JOBS)}.",
                f"I used to live in {rng.choice(CITIES)}.",
                f"I started a new job at {rng.choice(JOBS)}.",
                "My sister Ana lives in Rome.",
                f"Mel here, I moved back to {rng.choice(CITIES)}.",
            ]
        )
        out.append(
            conv(f"s{i:03d}", day, said, "Oh nice, Mel!", f"Ana says hi from {rng.choice(CITIES)}.")
        )
    return out


def extracts(sessions: list[Session], summarize: bool) -> list[SessionExtract]:
    summarizer = get_summarizer("extractive") if summarize else None
    return [
        extract_session(
            s,
            distill_session(s, summarizer, summarize=summarize, chunk_turns=2, now=0),
            recorded_at=1.0 + i,
        )
        for i, s in enumerate(sessions)
    ]


def state(g: UserGraph) -> tuple[list, list, list]:
    return (list(g.relations.items()), list(g.entities.items()), list(g.aliases.items()))


def check(kept: UserGraph, full: UserGraph) -> None:
    assert type(full.relations) is dict
    assert state(kept) == state(full)


def both(app: str = APP, user: str = USER) -> tuple[UserGraph, UserGraph]:
    return UserGraph(app, user), Full(app, user)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_session_gives_the_full_recomputation(seed: int) -> None:
    exs = extracts(life(70, seed), summarize=False)
    kept, full = both()
    for ex in exs:
        kept.add_session(ex)
        full.add_session(ex)
        check(kept, full)
    assert isinstance(kept.relations, Relations) and kept.relations.indexed
    rels = list(kept.relations.values())
    # The history exercised what the passes do: facts closed, stated ends, both derived.
    assert sum(r.ended_by not in ("", STATED) for r in rels) >= 5
    assert any(r.ended_by == STATED for r in rels)
    assert {CONTRADICTS, EXTENDS} <= {r.type for r in rels}
    assert any(r.version > 2 and r.type in FUNCTIONAL for r in rels)


def test_sessions_again_forgotten_loaded_pickled_and_edited_outside() -> None:
    exs = extracts(life(60, 9), summarize=False)
    kept, full = both()
    for ex in exs[:30]:
        kept.add_session(ex)
        full.add_session(ex)
    for ex in (exs[4], exs[29], exs[12]):  # added again: the session's evidence replaced
        kept.add_session(ex)
        full.add_session(ex)
        check(kept, full)
    assert kept.forget_session(exs[7].session_id) == full.forget_session(exs[7].session_id)
    check(kept, full)
    # Read back from its rows, as a commit does, and pickled, as Ray sends it.
    tables = shard_tables([kept])
    kept = pickle.loads(pickle.dumps(graph_from_tables(APP, USER, tables)))
    full = Full(APP, USER, kept.entities.values(), kept.aliases.values(), kept.relations.values())
    for ex in exs[30:45]:
        kept.add_session(ex)
        full.add_session(ex)
        check(kept, full)
    assert isinstance(kept.relations, Relations)  # logging its changes by now
    # Changed outside add_session (graph_commit drops a forgotten memory's relations).
    gone = [
        rid
        for rid, r in kept.relations.items()
        if r.src_kind == "memory" and r.src == next(iter(exs[31].memories)).memory_id
    ]
    assert gone
    for rid in gone:
        del kept.relations[rid]
        del full.relations[rid]
    some = next(r for r in kept.relations.values() if r.type in FUNCTIONAL)
    kept.relations[some.relation_id] = full.relations[some.relation_id] = some.bumped(
        "test", confidence=0.3
    )
    for ex in exs[45:]:
        kept.add_session(ex)
        full.add_session(ex)
        check(kept, full)


def test_a_generated_heavy_user() -> None:
    """backfill_cpu --heavy-user's data: distilled memories, many mentions per session."""
    sessions = generate(DatasetConfig(users=1, sessions_per_user=80)).sessions
    exs = extracts(sorted(sessions, key=lambda s: s.created_at), summarize=True)
    kept, full = both(sessions[0].app_name, sessions[0].user_id)
    for ex in exs:
        kept.add_session(ex)
        full.add_session(ex)
    check(kept, full)
    assert len(kept.relations) > 500


def test_the_passes_on_a_dict_and_on_relations_agree() -> None:
    """The functions themselves: a logged Relations fed changes one by one against the
    full passes on a copy, including relations the rules drop (derived, stated)."""
    g = UserGraph(APP, USER)
    for ex in extracts(life(40, 5), summarize=False):
        g.add_session(ex)
    rng = random.Random(0)
    logged = Relations(g.relations)
    close_superseded(logged)
    derive(logged, APP, USER)
    for _ in range(80):
        facts = FUNCTIONAL if rng.random() < 0.6 else None  # most changes to facts
        rid = rng.choice(
            [
                rid
                for rid, r in logged.items()
                if r.type not in DERIVED and (facts is None or r.type in facts)
            ]
        )
        r = logged[rid]
        change = rng.choice(["reopen", "drop", "stated", "again"])
        if change == "reopen":
            logged[rid] = r.bumped("t", valid_to=None, ended_by="")
        elif change == "drop":
            del logged[rid]
        elif change == "stated":
            logged[rid] = r.bumped("t", ended_by=STATED, valid_to=r.valid_from)
        else:
            del logged[rid]
            logged[rid] = r
        plain = dict(logged)
        close_superseded(logged)
        derive(logged, APP, USER)
        close_superseded(plain)
        derive(plain, APP, USER)
        assert list(logged.items()) == list(plain.items())
