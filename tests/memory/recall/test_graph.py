"""The graph axes of recall: the entity axis (names resolved through the user's graph,
aliases included), the graph axis (facts the question asks, one hop from the best hits)
and changed facts (now: the open one first; before: the closed one found)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path

import numpy as np

from mnemoray.graph import Alias, Entity, Relation, Support, UserGraph
from mnemoray.graph.cues import asked_relations
from mnemoray.graph.model import alias_key
from mnemoray.graph.recall import END, STALE, GraphRecall
from mnemoray.memory.recall.candidates import Candidates
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.inputs import user_graph
from mnemoray.memory.recall.retriever import rank_candidates
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.temporal import epoch


def ts(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp()


T1, T2, T3 = ts("2023-04-10"), ts("2023-06-20"), ts("2023-09-01")
TEXTS = {
    "m-boston": ("[2023-04-10] Elizabeth: Our neighborhood in Boston has the best bakeries.", T1),
    "m-seattle": ("[2023-06-20] Elizabeth: We finally moved to Seattle last weekend.", T2),
    "m-jonas1": ("[2023-04-10] Elizabeth: My older brother Jonas and I talk every Sunday.", T1),
    "m-jonas2": ("[2023-09-01] Elizabeth: Jonas and I went ice skating together.", T3),
    "m-bread": ("[2023-09-01] Elizabeth: I baked sourdough bread this morning.", T3),
    "m-rain": ("[2023-09-01] Alexander: It rained all week here.", T3),
}


def memories() -> list[Memory]:
    return [
        Memory(
            "app",
            "pair",
            "s",
            "chunk",
            text,
            memory_id=mid,
            event_time_start=t,
            event_time_end=t,
            created_at=t,
        )
        for mid, (text, t) in TEXTS.items()
    ]


def entity(eid: str, name: str, type_: str, speaker: bool = False) -> Entity:
    return Entity(eid, "app", "pair", name, type_, speaker=speaker, mention_count=1)


def alias(eid: str, surface: str, rule: str = "name") -> Alias:
    return Alias(eid, surface, alias_key(surface), rule, 1.0)


def mention(mid: str, eid: str) -> Relation:
    return Relation(f"r-{mid}-{eid}", "app", "pair", mid, "memory", "mentions", eid, "entity")


def fact(
    rid: str,
    src: str,
    rtype: str,
    dst: str,
    mid: str,
    start: float,
    end: float | None = None,
    ended_by: str = "",
) -> Relation:
    return Relation(
        rid,
        "app",
        "pair",
        src,
        "entity",
        rtype,
        dst,
        "entity",
        valid_from=start,
        valid_to=end,
        ended_by=ended_by,
        supports=(Support("s", (), (mid,), start),),
    )


def graph() -> UserGraph:
    ents = [
        entity("e-liz", "Elizabeth", "person", speaker=True),
        entity("e-alex", "Alexander", "person", speaker=True),
        entity("e-boston", "Boston", "place"),
        entity("e-seattle", "Seattle", "place"),
        entity("e-jonas", "Jonas", "person"),
    ]
    aliases = [
        alias("e-liz", "Elizabeth"),
        alias("e-liz", "Liz", "nickname"),
        alias("e-alex", "Alexander"),
        alias("e-boston", "Boston"),
        alias("e-seattle", "Seattle"),
        alias("e-jonas", "Jonas"),
    ]
    rels = [mention(mid, "e-liz") for mid in TEXTS if mid != "m-rain"]
    rels += [
        mention("m-rain", "e-alex"),
        mention("m-boston", "e-boston"),
        mention("m-seattle", "e-seattle"),
        mention("m-jonas1", "e-jonas"),
        mention("m-jonas2", "e-jonas"),
        fact("f-boston", "e-liz", "lives_in", "e-boston", "m-boston", T1, T2, "f-seattle"),
        fact("f-seattle", "e-liz", "lives_in", "e-seattle", "m-seattle", T2),
        fact("f-jonas", "e-jonas", "brother_of", "e-liz", "m-jonas1", T1),
    ]
    return UserGraph("app", "pair", ents, aliases, rels)


def rank(
    query: str,
    dense: list[float] | None = None,
    g: UserGraph | None = None,
    mode: str = "hybrid",
    top_k: int = 6,
) -> list:
    mems = memories()
    vec = np.asarray(dense if dense is not None else [0.3] * len(mems), dtype=np.float64)
    cands = Candidates.from_memories(mems, None if mode == "keyword" else vec)
    return rank_candidates(
        cands,
        query,
        None if mode == "keyword" else np.ones(4),
        top_k,
        RecallFilters(),
        RetrievalConfig(),
        mode,
        now=ts("2023-12-01"),
        graph=g if g is not None else graph(),
    )


def by_id(results: list) -> dict:
    return {r.memory.memory_id: r for r in results}


def test_the_entity_axis_resolves_a_nickname_through_the_graph() -> None:
    got = by_id(rank("how is Jonas doing, Liz?"))
    # "Liz" is nowhere in the words; the graph's alias finds Elizabeth's memories, and
    # Jonas (named by two memories of six) counts more than Elizabeth (five of six).
    assert got["m-bread"].signals["entity"] > 0 and "entity" in got["m-bread"].axes
    assert got["m-jonas2"].signals["entity"] > got["m-bread"].signals["entity"]
    assert got["m-rain"].signals["entity"] == 0 and "entity" not in got["m-rain"].axes
    gr = GraphRecall(graph(), list(TEXTS))
    assert set(gr.named("how is Jonas doing, Liz?")) == {"e-jonas", "e-liz"}
    assert gr.specificity("e-jonas") > gr.specificity("e-liz") > 0


def test_a_nickname_the_graph_never_saw_resolves_by_the_person_rules() -> None:
    g = UserGraph(
        "app", "pair", [entity("e-rob", "Robert", "person")], [alias("e-rob", "Robert")], []
    )
    assert GraphRecall(g, []).named("what did Bob cook?") == ("e-rob",)
    assert GraphRecall(g, []).named("what did we cook?") == ()


def test_the_graph_axis_follows_the_asked_relation_to_the_other_end() -> None:
    # The skating memory never says "brother": brother_of(Jonas, Elizabeth) leads there.
    dense = [0.30, 0.30, 0.30, 0.28, 0.31, 0.31]
    got = rank("What activities has Liz done with her brother?", dense)
    ids = [r.memory.memory_id for r in got]
    assert ids.index("m-jonas2") < ids.index("m-bread")
    skating = by_id(got)["m-jonas2"]
    assert "graph" in skating.axes and 0 < skating.signals["graph"] <= END
    assert by_id(got)["m-jonas1"].signals["graph"] == 1.0  # the fact's own memory


def test_now_prefers_the_open_fact_and_before_finds_the_closed_one() -> None:
    # Dense prefers the stale Boston statement (as in the long-conversation benchmark).
    dense = [0.40, 0.30, 0.30, 0.30, 0.30, 0.30]
    now = rank("Which city does Liz live in now?", dense)
    assert now[0].memory.memory_id == "m-seattle" and "graph" in now[0].axes
    assert by_id(now)["m-boston"].signals["graph"] == STALE
    before = rank("Where did Liz live before moving to Seattle?", [0.3, 0.4, 0.3, 0.3, 0.3, 0.3])
    assert before[0].memory.memory_id == "m-boston"
    assert before[0].signals["graph"] == 1.0 and "graph" in before[0].axes
    assert by_id(before)["m-seattle"].signals["graph"] >= 0  # not demoted for the past
    # Keyword mode (no embeddings) has the graph too.
    kw = rank("Which city does Liz live in now?", mode="keyword")
    assert kw[0].memory.memory_id == "m-seattle"


def test_the_hop_reaches_other_sessions_and_the_hits_keep_their_order() -> None:
    # One session per day; m-jonas1 and m-rain are the best hits (the seeds).
    sessions = ["d1", "d2", "d1", "d3", "d3", "d4"]
    gr = GraphRecall(graph(), list(TEXTS), sessions)
    pos = {mid: i for i, mid in enumerate(TEXTS)}
    signal = gr.graph_signal(
        gr.query("anything new lately?"),
        past=False,
        present=False,
        seeds=[pos["m-jonas1"], pos["m-rain"]],
    )
    # Jonas (two memories) leads to the skating day; Elizabeth, who speaks in every
    # session, leads nowhere: a speaker is no evidence of what the question is about.
    assert signal[pos["m-jonas2"]] > 0 and signal[pos["m-seattle"]] == 0
    # The hit's own session is no hop away: it ranks by its own words already.
    assert signal[pos["m-boston"]] == 0
    # The hits rise together, by the most they gave: their order stays the other
    # axes' (m-rain's own name, Alexander, is in no other memory).
    assert signal[pos["m-jonas1"]] == signal[pos["m-rain"]] == signal[pos["m-jonas2"]]


def test_names_the_graph_cannot_tell_apart_rank_by_the_records_entities() -> None:
    # "Portland" is no entity of the graph: the entity axis falls back to the words the
    # query shares with the records' entities, as it does without a graph.
    mems = [
        replace(m, entities=("Portland",) if m.memory_id == "m-rain" else ()) for m in memories()
    ]
    cands = Candidates.from_memories(mems, None)
    config = RetrievalConfig(weights={"bm25": 0})
    got = rank_candidates(
        cands,
        "the weather in Portland",
        None,
        3,
        RecallFilters(),
        config,
        "keyword",
        now=ts("2023-12-01"),
        graph=graph(),
    )
    assert [r.memory.memory_id for r in got] == ["m-rain"]
    assert "entity" in got[0].axes


def test_without_a_graph_the_graph_axis_is_absent() -> None:
    empty = UserGraph("app", "pair")
    got = rank("Which city does Liz live in now?", g=empty)
    assert all("graph" not in r.signals and "graph" not in r.axes for r in got)
    # Dense mode asks no graph even where there is one.
    dense = rank("Which city does Liz live in now?", mode="dense")
    assert all(set(r.signals) <= {"dense", "dense_rank"} for r in dense)

    class NoGraph:  # a LanceDB snapshot keeps none
        pass

    assert user_graph(NoGraph(), "app", "pair") is None  # type: ignore[arg-type]


def test_question_words_name_the_relations_they_ask() -> None:
    assert asked_relations("Which city does Alex live in now?") == {"lives_in"}
    assert {"brother_of", "sister_of"} <= asked_relations("Tell me about Alex's family.")
    assert "adopted" in asked_relations("What pets does she have?")
    assert asked_relations("What did we eat?") == frozenset()
    assert asked_relations("What does she do for a living?") == {"works_at"}
    assert asked_relations("Where did Alex spend his childhood?") == {"grew_up_in"}
    assert asked_relations("Which places has Liz traveled to?") == {"visited"}
    assert asked_relations("What does Jo drive these days?") == {"owns"}
    assert asked_relations("What does Kate do to relax?") == {"enjoys"}


def conv(sid: str, day: date, *turns: tuple[str, str]) -> Session:
    t = epoch(day) + 9 * 3600
    events = [
        Event(author=a, role="user", text=x, id=f"{sid}-{i}", timestamp=t + 60 * i)
        for i, (a, x) in enumerate(turns)
    ]
    return Session("app", "pair", session_id=sid, events=events, created_at=t)


def moved_service(tmp_path: Path) -> MemoryService:
    """A keyword-only service holding Liz's move from Boston to Seattle."""
    svc = MemoryService.open(tmp_path / "store", embedder=None, summarizer="extractive")
    svc.add_session(
        conv(
            "s1",
            date(2023, 4, 10),
            ("Elizabeth", "Our neighborhood in Boston has the best bakeries."),
            ("Alexander", "Lucky you, Liz."),
        )
    )
    svc.add_session(
        conv(
            "s2",
            date(2023, 6, 20),
            ("Elizabeth", "We finally moved to Seattle last weekend!"),
            ("Alexander", "Congrats!"),
        )
    )
    return svc


def test_recall_through_the_service_names_the_graph_axes(tmp_path: Path) -> None:
    svc = moved_service(tmp_path)
    try:
        now = svc.search("app", "pair", "Which city does Liz live in now?", top_k=5)
        assert "Seattle" in now[0].memory.text and "graph" in now[0].axes
        assert "Boston" not in now[0].memory.text
        before = svc.search("app", "pair", "Where did Liz live before Seattle?", top_k=5)
        assert "Boston" in before[0].memory.text and "graph" in before[0].axes
        assert "entity" in before[0].axes
    finally:
        svc.close()


def test_a_name_kept_apart_but_linked_asks_about_the_linked_entity_too() -> None:
    # "Gabe" stayed its own entity (a prefix of Gabriel, 0.6 < the merge threshold) with a
    # same_entity link; the car is Gabriel's fact.
    g = UserGraph(
        "app",
        "pair",
        [
            entity("e-gabriel", "Gabriel", "person"),
            entity("e-gabe", "Gabe", "person"),
            entity("e-car", "car", "thing"),
        ],
        [alias("e-gabriel", "Gabriel"), alias("e-gabe", "Gabe"), alias("e-car", "car")],
        [
            Relation(
                "r-same",
                "app",
                "pair",
                "e-gabe",
                "entity",
                "same_entity",
                "e-gabriel",
                "entity",
                confidence=0.6,
            ),
            fact("f-car", "e-gabriel", "owns", "e-car", "m-bread", T3),
        ],
    )
    gr = GraphRecall(g, list(TEXTS))
    gq = gr.query("What does Gabe drive these days?")
    assert set(gq.entities) == {"e-gabe", "e-gabriel"} and gq.relations == {"owns"}
    signal = gr.graph_signal(gq, past=False, present=True)
    assert signal[list(TEXTS).index("m-bread")] == 1.0


def test_results_say_which_facts_they_state_and_whether_they_still_hold() -> None:
    results = by_id(rank("Where did Liz live before moving to Seattle?"))
    boston = results["m-boston"].to_dict()["facts"]
    assert boston == [
        {
            "relation": "lives_in",
            "subject": "Elizabeth",
            "object": "Boston",
            "valid_from": "2023-04-10T00:00:00Z",
            "valid_to": "2023-06-20T00:00:00Z",
            "holds": False,
        }
    ]
    seattle = results["m-seattle"].to_dict()["facts"]
    assert seattle[0]["object"] == "Seattle" and seattle[0]["holds"] is True
    assert seattle[0]["valid_to"] is None
    assert "facts" not in results["m-bread"].to_dict()  # states no typed fact
    # Without a graph, no facts (and no error).
    plain = rank("Where did Liz live?", g=UserGraph("app", "pair", [], [], []))
    assert all("facts" not in r.to_dict() for r in plain)


def test_the_service_json_carries_fact_validity(tmp_path: Path) -> None:
    svc = moved_service(tmp_path)
    try:
        found = [r.to_dict() for r in svc.search("app", "pair", "Where does Liz live?", top_k=10)]
        facts = {
            (f["object"], f["holds"])
            for r in found
            for f in r.get("facts", ())
            if f["relation"] == "lives_in"
        }
        assert ("Seattle", True) in facts and ("Boston", False) in facts
    finally:
        svc.close()


def _moved_user(store: Path) -> MemoryService:
    svc = MemoryService.open(store, embedder=None)
    jan = ts("2025-01-10")
    for sid, t, texts in [
        ("s1", jan, ["I live in Paris. I work at Acme Robotics."]),
        ("s2", jan + 86400, ["My parrot Kiwi loves sunflower seeds."]),
        (
            "s3",
            ts("2025-03-05"),
            ["Big news: I moved to Berlin last month for a new job at Zeta Labs."],
        ),
    ]:
        events = [
            Event(author="user", role="user", text=x, timestamp=t + i) for i, x in enumerate(texts)
        ]
        svc.add_session(Session("app", "u", session_id=sid, events=events))
    return svc


def test_a_question_about_now_prefers_the_fact_that_holds_now(tmp_path: Path) -> None:
    svc = _moved_user(tmp_path)
    for question in ("Which city do I live in now?", "where do I live?"):
        got = svc.search("app", "u", question, top_k=3, mode="keyword")
        assert got and "Berlin" in got[0].memory.text, [r.memory.text for r in got]
        paris = [r for r in got if "Paris" in r.memory.text]
        assert all(r.signals["graph"] < 0 for r in paris)
    # Asked about the past, the closed fact is the answer.
    got = svc.search("app", "u", "Where did I live before Berlin?", top_k=3, mode="keyword")
    assert "Paris" in got[0].memory.text


def test_a_speaker_lifts_nothing_through_the_graph(tmp_path: Path) -> None:
    # Every session is the user's: the hop from the best hit through its speaker
    # would add to every other memory, with no word of the question in them.
    got = _moved_user(tmp_path).search("app", "u", "parrot", top_k=10, mode="keyword")
    assert got and all("parrot" in r.memory.text for r in got), [r.memory.text for r in got]
