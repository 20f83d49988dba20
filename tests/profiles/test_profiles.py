"""User profiles and the domain index, derived from a store a real backfill built: what
they hold, that every commit (ingest, forget) changes them, and tenant isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemoray.errors import NotFound, Unavailable
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.profiles.domain import merged_index
from mnemoray.profiles.profile import depth_of
from tests.support.factories import T0, session
from tests.support.profile_data import ALICE, BOB, build_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("profiles"))


@pytest.fixture
def service(store: Path):
    s = MemoryService.open(store, embedder=None)
    yield s
    s.close()


def area(profile, topic: str):
    return next(a for a in profile.expertise if a.topic == topic)


def test_the_profile_of_a_backfilled_user(service: MemoryService) -> None:
    p = service.profile("app", "alice")
    assert p.store_version == service.snapshot().version
    assert p.sessions == 4 and p.memories == len(service.snapshot().rows_for_user("app", "alice"))
    assert p.memory_kinds["chunk"] >= 4 and sum(p.memory_kinds.values()) == p.memories
    assert p.first_active == pytest.approx(T0) and p.last_active > T0 + 100 * 86_400
    parrot = area(p, "parrot")  # three sessions back to it, with numbers and names
    assert (parrot.depth, parrot.sessions, parrot.mentions) == ("expert", 3, 5)
    assert parrot.specific >= 2 and parrot.term == "parrot"
    # Evidence: the user's own memories that hold those turns, newest first.
    rows = {m.memory_id: m for m in service.snapshot().rows_for_user("app", "alice")}
    assert parrot.evidence and all(
        rows[i].kind == "chunk" and "parrot" in rows[i].text.lower() for i in parrot.evidence
    )
    days = [rows[i].event_time_start for i in parrot.evidence]
    assert days == sorted(days, reverse=True)
    assert p.expertise[0].topic == "parrot"  # the deepest first
    assert not any(a.topic in ("sourdough", "every", "divorce") for a in p.expertise)
    # Declined: a bare "No thanks." declines what the question asked; a stated one
    # names its own topic.
    assert [(d.topic, d.session_id) for d in p.declined] == [
        ("divorce", "a1"),
        ("ex-husband", "a3"),
    ]
    assert p.declined[0].said == "No thanks."
    s = p.style
    assert s.turns == 9 and s.question_ratio == round(1 / 9, 3)
    assert s.follow_ups_asked == 4 and s.follow_ups_answered == 2  # "No thanks." is no answer
    assert s.verbosity == "moderate" and s.specifics_ratio > 0.5
    names = {e["name"]: e for e in p.entities}
    assert "Kiko" in names and names["Kiko"]["memories"] >= 2
    assert all(e["name"] != "user" for e in p.entities)  # speakers are not listed


def test_style_tells_registers_apart(service: MemoryService) -> None:
    bob = service.profile("app", "bob")
    assert bob.style.formality == "informal" and bob.style.informal_markers >= 3
    assert bob.style.specifics_ratio == 0
    assert area(bob, "parrot").depth == "surface"  # one session, no specifics
    assert [depth_of(1, 1, 0), depth_of(2, 2, 0), depth_of(1, 3, 0), depth_of(3, 3, 2)] == [
        "surface",
        "moderate",
        "moderate",
        "expert",
    ]


def test_the_domain_index_counts_users_never_names_them(service: MemoryService) -> None:
    d = service.domain("app")
    assert (d.users, d.sessions) == (2, 6)
    assert d.memories == sum(service.profile("app", u).memories for u in ("alice", "bob"))
    top = d.topics[0]
    assert (top.topic, top.users, top.sessions) == ("parrot", 2, 4)
    assert "parrot" in d.well_covered and "starter" in d.weakly_covered
    assert {c["topic"]: c["users"] for c in d.cross_cutting} == {"parrot": 2, "sourdough": 2}
    # Every month from the first memory to the last, with the gaps.
    months = [p.period for p in d.periods]
    assert months[0] == "2023-11" and months == sorted(months) and len(months) == 5
    assert sum(p.memories for p in d.periods) == d.memories
    # The years and decades the memories talk about (dates in the entity graph).
    eras = {e["era"]: e for e in d.eras_mentioned}
    assert eras["1960s"]["users"] == 1 and eras["1960s"]["memories"] >= 1
    assert eras["2023"]["users"] == 1  # "in 2023" (alice); bob names no date
    text = repr(d.to_dict())
    for private in ("alice", "bob", "No thanks", "Kiko is 12", "divorce", "ex-husband"):
        assert private not in text  # counts and topic terms only; declined topics never
    # Another app's memories are never in it (alice sails in "other").
    assert not any(t.topic == "catamaran" for t in d.topics)
    assert service.domain("other").users == 1


def test_tenant_isolation(service: MemoryService) -> None:
    alice = service.profile("app", "alice")
    elsewhere = service.profile("other", "alice")
    assert {a.topic for a in elsewhere.expertise} == {"catamaran"}
    assert not any(a.topic == "catamaran" for a in alice.expertise)
    bob_ids = {m.memory_id for m in service.snapshot().rows_for_user("app", "bob")}
    assert not bob_ids & {i for a in alice.expertise for i in a.evidence}
    with pytest.raises(NotFound, match="app/carol has no memories"):
        service.profile("app", "carol")
    with pytest.raises(NotFound, match="no domain index"):
        service.domain("nobody")


def test_forget_and_ingest_change_the_view_at_once(tmp_path: Path) -> None:
    store = build_store(tmp_path, ALICE)
    service = MemoryService.open(store, embedder=None)
    try:
        before = service.profile("app", "alice")
        assert service.profile("app", "alice") is before  # kept for its version
        evidence = area(before, "parrot").evidence[0]
        assert service.forget_memory("app", "alice", evidence) == 1
        after = service.profile("app", "alice")
        assert after.store_version > before.store_version
        assert all(evidence not in a.evidence for a in after.expertise)
        assert evidence not in {i for d in after.declined for i in d.memory_ids}
        # Forgetting the session that declined a topic takes the refusal away too.
        assert service.forget_session("app", "alice", "a1") > 0
        gone = service.profile("app", "alice")
        assert [d.session_id for d in gone.declined] == ["a3"] and gone.sessions == 3
        assert "a1" not in {m.session_id for m in service.snapshot().rows_for_user("app", "alice")}
        # An online ingestion updates it too: a fourth session on parrots.
        service.ingest_session(
            session(
                "a5",
                T0 + 200 * 86_400,
                ("u", "The parrot club asked me to judge the 2024 parrot show in Bremen."),
                user="alice",
            )
        )
        grown = service.profile("app", "alice")
        assert grown.sessions == 4 and area(grown, "parrot").sessions == 3
        assert grown.last_active > gone.last_active
        # The domain index follows the same versions.
        assert service.domain("app").memories == grown.memories
    finally:
        service.close()


def test_a_shard_replica_gives_its_part_and_the_parts_add_up(store: Path) -> None:
    whole = MemoryService.open(store, embedder=None)
    try:
        expected = whole.domain("app")
        parts = []
        for shard in range(whole.store.shards):
            one = MemoryService.open(_one_shard(store, shard), embedder=None)
            try:  # as the Index replica of one shard answers the ingress
                ops = MemoryOps(one)
                with pytest.raises(Unavailable, match="every shard"):
                    ops.call("domain", "app", "")
                parts.append(ops.call("domain_part", "app", ""))
            finally:
                one.close()
        assert sum(len(p.users) for p in parts) == 2
        assert merged_index("app", parts) == expected
        assert MemoryOps(whole).call("domain", "app", "") == expected.to_dict()
    finally:
        whole.close()


def _one_shard(store: Path, shard: int):
    from mnemoray.memory.store.parquet.store import MemoryStore

    return MemoryStore(store, load_shards=[shard])


def test_a_lancedb_store_has_profiles_too(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")
    service = MemoryService.open(f"lancedb://{tmp_path / 'ln'}", embedder=None)
    try:
        for s in ALICE:
            service.ingest_session(s)
        p = service.profile("app", "alice")
        assert area(p, "parrot").depth == "expert" and p.entities == []  # no graph kept
        evidence = area(p, "parrot").evidence[0]
        assert service.forget_memory("app", "alice", evidence) == 1
        assert evidence not in area(service.profile("app", "alice"), "parrot").evidence
        assert service.domain("app").users == 1
    finally:
        service.close()


def test_a_commit_computes_again_only_the_users_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import OrderedDict

    from mnemoray.profiles import reads

    monkeypatch.setattr(reads, "_by_content", OrderedDict())
    computed: list[str] = []
    real = reads.build_profile

    def counted(snap, app, user, memories=None):  # type: ignore[no-untyped-def]
        computed.append(user)
        return real(snap, app, user, memories)

    monkeypatch.setattr(reads, "build_profile", counted)
    store = build_store(tmp_path, [*ALICE, BOB[0]])
    service = MemoryService.open(store, embedder=None)
    try:
        first = service.domain("app")
        assert sorted(computed) == ["alice", "bob"]
        service.ingest_session(BOB[1])  # a commit that changes bob only
        second = service.domain("app")
        assert sorted(computed) == ["alice", "bob", "bob"]
        assert second.store_version > first.store_version and second.sessions == 6
        alice = service.profile("app", "alice")  # kept, at the new version
        assert alice.store_version == second.store_version and computed.count("alice") == 1
    finally:
        service.close()


@pytest.mark.parametrize(
    ("said", "declined"),
    [
        ("I'd rather not talk about my divorce right now.", "divorce"),
        ("Please don't ask me about work", "work"),
        ("Let's not get into politics, ok?", "politics"),
        ("I'd rather not talk about it.", "divorce"),  # "it": what was asked
        ("No thanks.", "divorce"),
        ("Nope, it went fine, we are friends now.", None),  # an answer, not a refusal
        ("No thanks, I would rather keep it between me and my family honestly", None),
        ("Sure, it was hard but we are fine.", None),
    ],
)
def test_declined_topics_by_fixed_cues(said: str, declined: str | None) -> None:
    from mnemoray.profiles.style import declined_in
    from mnemoray.profiles.turns import Turn

    asked = Turn(
        "e1",
        "s",
        "assistant",
        "Would you like to talk about your divorce?",
        "2023-01-01",
        ("m1",),
        False,
    )
    assert (
        declined_in(Turn("e2", "s", "user", said, "2023-01-01", ("m1",), True), asked) == declined
    )


def test_an_agents_own_memories_stay_out_of_the_profile(tmp_path: Path) -> None:
    from mnemoray.memory.records.record import Memory

    service = MemoryService.open(tmp_path / "store", embedder=None)
    try:
        for s in ALICE[:2]:
            service.ingest_session(s)
        before = service.profile("app", "alice")
        own = [
            Memory("app", "alice", "online", "fact", text, agent_name="coach")
            for text in (
                "I play the violin in an orchestra.",
                "My violin teacher is strict about violin scales.",
            )
        ]
        assert len(service.add_memories(own)) == 2
        after = service.profile("app", "alice")  # what a recall without an agent sees
        assert after.memories == before.memories and after.sessions == before.sessions
        assert not any(a.topic == "violin" for a in after.expertise)
        assert not any(t.topic == "violin" for t in service.domain("app").topics)
        shared = Memory("app", "alice", "online", "fact", "I also play the violin at home.")
        service.add_memories(
            [shared, Memory("app", "alice", "online", "fact", "Violin lessons on Fridays.")]
        )
        assert any(a.topic == "violin" for a in service.profile("app", "alice").expertise)
    finally:
        service.close()


def test_a_damaged_graph_shard_leaves_the_profile_without_entities(
    store: Path, service: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from collections import OrderedDict

    from mnemoray.errors import StoreCorrupt
    from mnemoray.memory.store.graph.parts import part_files
    from mnemoray.memory.store.layout import shard_of
    from mnemoray.memory.store.parquet.store import MemoryStore
    from mnemoray.profiles import reads

    monkeypatch.setattr(reads, "_by_content", OrderedDict())
    healthy, healthy_domain = service.profile("app", "alice"), service.domain("app")
    assert healthy.entities
    reads._by_content.clear()  # nothing computed from the healthy copy carries over
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    m = MemoryStore(copy).manifest()
    shard = shard_of("app", "alice", m.shards)
    part = part_files(copy, shard, m.graph[shard][0])[0]
    whole = part.read_bytes()
    part.write_bytes(whole[: len(whole) // 2])
    damaged = MemoryService.open(copy, embedder=None)
    try:
        with pytest.raises(StoreCorrupt):  # the shard's graph really is unreadable
            damaged.snapshot().graph.user("app", "alice")
        p = damaged.profile("app", "alice")
        assert p.entities == []
        assert (p.expertise, p.declined, p.style) == (
            healthy.expertise,
            healthy.declined,
            healthy.style,
        )
        assert MemoryOps(damaged).call("profile", "app", "alice")["entities"] == []
        d = damaged.domain("app")  # the app's index still answers
        # Every topic is still there (without the graph, a person's name such as
        # "Ortiz" is not told apart from a topic word).
        assert d.users == healthy_domain.users
        assert {t.term for t in healthy_domain.topics} <= {t.term for t in d.topics}
        assert "1960s" not in {e["era"] for e in d.eras_mentioned}  # alice's, in her graph
    finally:
        damaged.close()
    part.write_bytes(whole)  # repaired: the profile read past the damage is not kept
    repaired = MemoryService.open(copy, embedder=None)
    try:
        assert repaired.profile("app", "alice").entities == healthy.entities
    finally:
        repaired.close()
