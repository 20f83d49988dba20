"""Memory scopes in process: agent-only memories and cross-app sharing (both sides consent),
over a real store with the real MiniLM embedder and the extractive summarizer."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mnemoray.embedders import open_embedder
from mnemoray.errors import ConfigError, Forbidden, NotFound, Unavailable
from mnemoray.memory.hygiene.consolidate import ConsolidationPolicy, plan_groups
from mnemoray.memory.records.filters import RecallFilters, RetrievalError
from mnemoray.memory.records.record import Memory, MemoryRecordError
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.layout import parquet_path, shard_of
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.protocol import open_backend
from mnemoray.memory.store.scopes import NotOwner, ScopeError, ScopePolicy
from mnemoray.sessions.events import model_message, user_message
from mnemoray.sessions.session import Session
from mnemoray.settings.scopes import scope_settings
from mnemoray.summarizers.extractive import ExtractiveSummarizer
from tests.support.factories import FLYING, T0, parrot, session
from tests.support.store_contract import BACKENDS, location

BOTH = {"shop": {"share_with": ["support"]}, "support": {"read_from": ["shop"]}}


@pytest.fixture(scope="module")
def embedder():
    return open_embedder("default")


def make(root: Path, embedder, scopes=None, shards: int | None = None) -> MemoryService:
    service = MemoryService(MemoryStore(root, shards), embedder, ExtractiveSummarizer())
    service.scopes = ScopePolicy.of(scopes)
    return service


def note(app: str, user: str, text: str, agent: str = "", t: float = T0) -> Memory:
    return Memory(
        app, user, "online", "fact", text, agent_name=agent, created_at=t, event_time_end=t
    )


def texts(results) -> list[str]:
    return [r.memory.text for r in results]


def view(agent: str | None) -> RecallFilters:
    return RecallFilters(agent_name=agent)


# -- agent scope -------------------------------------------------------------------------
def test_an_agent_only_memory_reaches_only_its_agent(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder)
    svc.add_memories(
        [
            note("app", "ana", "Ana's flight to Lisbon leaves at 9", "travel"),
            note("app", "ana", "Ana's budget for Lisbon is 800 euros", "finance"),
            note("app", "ana", "Ana lives in Porto"),
        ]
    )
    q = "What about Ana and Lisbon?"
    assert sorted(texts(svc.search("app", "ana", q, 10, view("travel")))) == [
        "Ana lives in Porto",
        "Ana's flight to Lisbon leaves at 9",
    ]
    assert sorted(texts(svc.search("app", "ana", q, 10, view("finance")))) == [
        "Ana lives in Porto",
        "Ana's budget for Lisbon is 800 euros",
    ]
    # No agent: the shared memories only; the same for an agent that owns none.
    assert texts(svc.search("app", "ana", q, 10)) == ["Ana lives in Porto"]
    assert texts(svc.search("app", "ana", q, 10, view("writer"))) == ["Ana lives in Porto"]
    # Every path that recalls honours the view: the compiler hook and the load_memory tool.
    assert [s.text for s in svc.memory_search("writer")("app", "ana", q, 10)] == [
        "Ana lives in Porto"
    ]
    loaded = svc.load_memory("app", "ana", q, 10, agent_name="travel")
    assert {m["text"] for m in loaded} == {
        "Ana lives in Porto",
        "Ana's flight to Lisbon leaves at 9",
    }
    assert {m.get("agent_name") for m in loaded} == {None, "travel"}


def test_the_same_words_for_two_agents_are_two_records(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder)
    shared = note("app", "ana", "Ana prefers window seats")
    # A shared record keeps the id it had before scopes existed (the agent is not hashed).
    assert (
        shared.memory_id
        == Memory("app", "ana", "online", "fact", "Ana prefers window seats").memory_id
    )
    added = svc.add_memories(
        [
            shared,
            note("app", "ana", "Ana prefers window seats", "a1"),
            note("app", "ana", "Ana prefers window seats", "a2"),
        ]
    )
    assert len({m.memory_id for m in added}) == 3
    rows = svc.list_memories("app", "ana")[0]
    assert sorted(m.agent_name for m in rows) == ["", "a1", "a2"]


def test_sessions_are_stamped_by_the_apps_memory_scope(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder, {"vet": {"memory_scope": "agent"}})
    added = svc.add_session(parrot(app="vet"))  # its model turns are by "assistant"
    assert added and {m.agent_name for m in added} == {"assistant"}
    assert svc.search("vet", "alice", FLYING, 3) == []
    assert svc.search("vet", "alice", FLYING, 3, view("receptionist")) == []
    hits = svc.search("vet", "alice", FLYING, 3, view("assistant"))
    assert hits and "parrot" in hits[0].memory.text.lower()
    # Another app keeps the default scope: shared by all its agents.
    assert {m.agent_name for m in svc.add_session(parrot(app="pets"))} == {""}


def test_a_session_of_several_agents_needs_an_agent_name(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder, {"vet": {"memory_scope": "agent"}})
    two = Session(
        "vet",
        "alice",
        "s2",
        events=[
            user_message("My parrot plucks its feathers", timestamp=T0, id="e0"),
            model_message("triage", "That can be stress or illness", timestamp=T0 + 1, id="e1"),
            model_message("doctor", "Book a check-up this week", timestamp=T0 + 2, id="e2"),
        ],
    )
    with pytest.raises(ScopeError) as err:
        svc.add_session(two)
    assert err.value.field == "agent_name" and "'doctor', 'triage'" in str(err.value)
    assert svc.list_memories("vet", "alice")[0] == []  # nothing half-written
    added = svc.ingest_session(two, agent_name="doctor").added
    assert added and {m.agent_name for m in added} == {"doctor"}
    with pytest.raises(ScopeError, match="is not an agent name"):
        svc.ingest_session(two, agent_name="dr who")


def test_bad_agent_names_are_refused_naming_the_field(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder)
    with pytest.raises(RetrievalError) as err:
        svc.search("app", "ana", "x", 3, {"agent_name": "no spaces please"})
    assert err.value.field == "filters.agent_name"
    with pytest.raises(MemoryRecordError) as err2:
        note("app", "ana", "x", agent="../etc")
    assert err2.value.field == "agent_name"


def test_a_segment_written_before_scopes_reads_as_shared(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder, shards=1)
    svc.add_memories([note("app", "ana", "Ana keeps bees")])
    entry = svc.store.manifest().segments[0][0]
    path = parquet_path(svc.store.root, 0, entry.name)
    pq.write_table(pq.read_table(path).drop_columns(["agent_name"]), path)
    again = make(tmp_path / "s", embedder)
    assert [(m.text, m.agent_name) for m in again.list_memories("app", "ana")[0]] == [
        ("Ana keeps bees", "")
    ]
    assert texts(again.search("app", "ana", "bees", 3, view("anyone"))) == ["Ana keeps bees"]


def test_consolidation_never_merges_across_agents() -> None:
    old = T0 - 400 * 86_400
    rows = [
        note("app", "ana", f"fact {i}", agent, t=old + i) for i in range(6) for agent in ("", "a1")
    ]
    groups = plan_groups(rows, ConsolidationPolicy(min_group=2), set(), T0)
    assert groups and all(len({m.agent_name for m in g}) == 1 for g in groups)
    assert {g[0].agent_name for g in groups} == {"", "a1"}


# -- cross-app sharing --------------------------------------------------------------------
def shop_and_support(root: Path, embedder, scopes=BOTH) -> MemoryService:
    svc = make(root, embedder, scopes)
    svc.add_session(parrot(app="shop", user="alice"))
    svc.add_memories(
        [
            note("shop", "alice", "Alice ordered a large bird cage", "sales"),
            note("support", "alice", "Alice asked about the return policy"),
            note("shop", "bob", "Bob bought a parrot perch"),
        ]
    )
    return svc


def test_two_sided_consent_shares_in_one_ranking_naming_the_owner(tmp_path: Path, embedder) -> None:
    svc = shop_and_support(tmp_path / "s", embedder)
    hits = svc.search("support", "alice", FLYING, 10)
    owners = {r.memory.app_name for r in hits}
    assert owners == {"shop", "support"}  # both apps' candidates, one fused ranking
    assert hits[0].memory.app_name == "shop" and "parrot" in hits[0].memory.text.lower()
    assert [r.score for r in hits] == sorted((r.score for r in hits), reverse=True)
    assert {r.to_dict()["app_name"] for r in hits} == {"shop", "support"}
    # top_k cuts the fused list, not each app's.
    assert len(svc.search("support", "alice", FLYING, 2)) == 2
    # The sharing app itself does not read back: shop lists no read_from.
    assert {r.memory.app_name for r in svc.search("shop", "alice", FLYING, 10)} == {"shop"}
    assert svc.has_memories("support", "alice")


def test_recall_hooks_name_each_owner(tmp_path: Path, embedder) -> None:
    """Recall counts (eviction by use) go to the app that holds each memory."""
    svc = shop_and_support(tmp_path / "s", embedder)
    seen = []
    svc.on_memory_recalled(seen.append)
    hits = svc.search("support", "alice", FLYING, 10)
    assert svc.hooks.flush(10)
    by_owner = {e.app_name: set(e.memory_ids) for e in seen}
    assert by_owner == {
        app: {r.memory.memory_id for r in hits if r.memory.app_name == app}
        for app in ("shop", "support")
    }
    assert {e.user_id for e in seen} == {"alice"}


@pytest.mark.parametrize(
    "scopes",
    [
        {"support": {"read_from": ["shop"]}},  # the reader alone
        {"shop": {"share_with": ["support"]}},  # the sharer alone
        {"shop": {"share_with": ["support"]}, "support": {"read_from": ["shop2"]}},
        {"shop": {"share_with": ["other"]}, "support": {"read_from": ["shop"]}},
    ],
)
def test_one_sided_config_shares_nothing(tmp_path: Path, embedder, scopes) -> None:
    svc = shop_and_support(tmp_path / "s", embedder, scopes)
    hits = svc.search("support", "alice", "parrot bird cage return policy", 10)
    assert {r.memory.app_name for r in hits} == {"support"}


def test_sharing_never_crosses_users(tmp_path: Path, embedder) -> None:
    svc = shop_and_support(tmp_path / "s", embedder)
    svc.add_memories([note("support", "bob", "Bob asked for an invoice")])
    for user, other in (("alice", "bob"), ("bob", "alice")):
        hits = svc.search("support", user, "parrot perch bird cage invoice", 20)
        assert hits and {r.memory.user_id for r in hits} == {user}
        assert all(other.capitalize() not in r.memory.text for r in hits)
    assert svc.search("support", "carol", "parrot", 5) == []
    assert not svc.has_memories("support", "carol")


def test_agent_only_memories_never_cross_apps(tmp_path: Path, embedder) -> None:
    svc = shop_and_support(tmp_path / "s", embedder)
    for agent in (None, "sales", "helpdesk"):
        hits = svc.search("support", "alice", "large bird cage order", 10, view(agent))
        assert "Alice ordered a large bird cage" not in texts(hits)
    own = svc.search("shop", "alice", "large bird cage order", 10, view("sales"))
    assert "Alice ordered a large bird cage" in texts(own)


def test_forget_and_edit_stay_with_the_owner(tmp_path: Path, embedder) -> None:
    svc = shop_and_support(tmp_path / "s", embedder)
    shared = next(
        r.memory for r in svc.search("support", "alice", FLYING, 10) if r.memory.app_name == "shop"
    )
    with pytest.raises(NotOwner) as err:
        svc.forget_memory("support", "alice", shared.memory_id)
    assert isinstance(err.value, Forbidden) and err.value.status == 403
    assert "belongs to app 'shop'" in str(err.value) and "forget it through app 'shop'" in str(
        err.value
    )
    with pytest.raises(NotOwner, match="edit it through app 'shop'"):
        svc.edit_memory("support", "alice", shared.memory_id, "Alice wants a budgie")
    # The preview of a forget by query lists only what this app may forget.
    preview = svc.preview_forget("support", "alice", FLYING, top_k=10)
    assert {r.memory.app_name for r in preview.results} == {"support"}
    # Without consent the id is just unknown: nothing says another app holds it.
    alone = make(tmp_path / "s", embedder)
    assert alone.forget_memory("support", "alice", shared.memory_id) == 0
    with pytest.raises(NotFound):
        alone.edit_memory("support", "alice", shared.memory_id, "x")
    # The owner forgets it; the reader no longer sees it.
    assert svc.forget_memory("shop", "alice", shared.memory_id) == 1
    assert shared.memory_id not in {
        r.memory.memory_id for r in svc.search("support", "alice", FLYING, 10)
    }


def test_a_replica_without_the_shared_shard_refuses(tmp_path: Path, embedder) -> None:
    shop_and_support(tmp_path / "s", embedder).close()
    store = MemoryStore(tmp_path / "s")
    mine = shard_of("support", "alice", store.shards)
    if shard_of("shop", "alice", store.shards) == mine:
        pytest.skip("both apps' rows of alice landed on one shard")
    part = MemoryService(
        MemoryStore(tmp_path / "s", load_shards=[mine]), embedder, ExtractiveSummarizer()
    )
    part.scopes = ScopePolicy.of(BOTH)
    with pytest.raises(Unavailable, match="index_mode: ingress"):
        part.search("support", "alice", FLYING, 3)


# -- settings -------------------------------------------------------------------------------
def test_scope_settings_build_the_policy() -> None:
    s = scope_settings(
        {
            "memory_scope": "agent",
            "apps": {
                "support": {"read_from": ["shop"], "memory_scope": "user"},
                "shop": {"share_with": ["support"]},
            },
        }
    )
    p = s.policy
    assert p.readable_apps("support") == ("shop",) and p.readable_apps("shop") == ()
    assert p.memory_scope("support") == "user" and p.memory_scope("shop") == "agent"
    assert p.memory_scope("unlisted") == "agent"
    # Not transitive: a reads b, b reads c; a does not read c. An app never "shares" itself.
    chain = ScopePolicy.of(
        {
            "a": {"read_from": ["b", "a"]},
            "b": {"share_with": ["a"], "read_from": ["c"]},
            "c": {"share_with": ["b", "a"]},
        }
    )
    assert chain.readable_apps("a") == ("b",) and chain.readable_apps("b") == ("c",)
    with pytest.raises(ConfigError) as err:
        scope_settings({"apps": {"shop": {"share": ["support"]}}})
    assert err.value.field == "scopes.apps.shop.share"
    with pytest.raises(ConfigError) as err2:
        scope_settings({"memory_scope": "team"})
    assert err2.value.field == "scopes.memory_scope"


def test_a_session_helper_with_another_author_is_still_one_agent(tmp_path: Path, embedder) -> None:
    svc = make(tmp_path / "s", embedder, {"app": {"memory_scope": "agent"}})
    s = session("s9", T0, ("u", "I collect stamps"), ("m", "Stamps are fun"))
    assert {m.agent_name for m in svc.add_session(s)} == {"assistant"}


# -- every store backend --------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_scopes_hold_on_every_backend(tmp_path: Path, embedder, backend: str) -> None:
    """Agent isolation, two-sided sharing, user isolation and owner-only forget, on the
    Parquet + FAISS store and on LanceDB alike (the rules live above the backend)."""
    store = open_backend(location(backend, tmp_path / "store"))
    svc = MemoryService(store, embedder, ExtractiveSummarizer())
    svc.scopes = ScopePolicy.of(BOTH)
    svc.add_memories(
        [
            note("shop", "ana", "Ana's parrot eats sunflower seeds"),
            note("shop", "ana", "Ana's parrot card ends 4242", "billing"),
            note("support", "ana", "Ana reported a broken parrot perch"),
            note("shop", "bo", "Bo's parrot eats millet"),
        ]
    )
    q = "what does the parrot eat?"
    got = {(r.memory.app_name, r.memory.text) for r in svc.search("support", "ana", q, 10)}
    assert got == {
        ("shop", "Ana's parrot eats sunflower seeds"),
        ("support", "Ana reported a broken parrot perch"),
    }
    assert "Ana's parrot card ends 4242" in texts(svc.search("shop", "ana", q, 10, view("billing")))
    assert "Ana's parrot card ends 4242" not in texts(svc.search("shop", "ana", q, 10))
    shared = next(
        r.memory for r in svc.search("support", "ana", q, 10) if r.memory.app_name == "shop"
    )
    with pytest.raises(NotOwner):
        svc.forget_memory("support", "ana", shared.memory_id)
    assert svc.forget_memory("shop", "ana", shared.memory_id) == 1
    assert {r.memory.app_name for r in svc.search("support", "ana", q, 10)} == {"support"}


def test_export_and_import_keep_the_agent(tmp_path: Path, embedder) -> None:
    from mnemoray.memory.store.ops.transfer import export_jsonl, read_export

    svc = make(tmp_path / "s", embedder)
    svc.add_memories(
        [
            note("app", "ana", "Ana's PIN hint is her cat", "security"),
            note("app", "ana", "Ana likes jazz"),
        ]
    )
    assert export_jsonl(svc.snapshot(), tmp_path / "out.jsonl") == 2
    _, batches = read_export(tmp_path / "out.jsonl", 10)
    back = [m for batch in batches for m in batch]
    assert sorted((m.text, m.agent_name) for m in back) == [
        ("Ana likes jazz", ""),
        ("Ana's PIN hint is her cat", "security"),
    ]
    other = make(tmp_path / "t", embedder)
    other.add_memories(back)
    assert texts(other.search("app", "ana", "cat jazz", 5)) == ["Ana likes jazz"]
