"""Asking a user's entity graph: the one rule behind ``MemoryService.graph`` /
``neighbours``, the ``mnemoray graph`` command and ``GET /v1/graph/{app}/{user}``.

An entity is named by its id (``ent-...``) or by a name or alias ("Mel" finds
Melanie). The answer is the entity, its facts (those that hold now, or at ``at``),
and the nodes within ``depth`` hops, nearest first, each with the relation that
reached it. Everything is read from the snapshot (no disk read per request).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from mnemoray.errors import InvalidInput, NotFound, Unsupported
from mnemoray.graph import RELATION_TYPES, Entity, Relation, UserGraph
from mnemoray.graph.index import MAX_DEPTH
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.sessions.events import parse_timestamp

FEATURE = "the entity graph"
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
TEXT_CHARS = 160  # a memory node shows this much of its text


def parse_at(value: float | int | str | None) -> float | None:
    """World time ``at`` as epoch seconds: a number, or ISO-8601 ("2023-05-07"; UTC when
    it names no zone), by the events' one rule; None or "" is no time filter."""
    if value is None or value == "":
        return None
    return parse_timestamp(value, "at")


def check_query(depth: int, types: Iterable[str] | None, limit: int) -> list[str] | None:
    """Checked ``depth``, ``types`` (None: all) and ``limit``; one InvalidInput each."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise InvalidInput(
            f"must be an integer from 1 to {MAX_DEPTH}, got {depth!r}", field="depth"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit"
        )
    if types is None:
        return None
    picked = [t for t in types if t]
    unknown = [t for t in picked if t not in RELATION_TYPES]
    if unknown:
        raise InvalidInput(
            f"unknown relation type {unknown[0]!r}; known: {', '.join(sorted(RELATION_TYPES))}",
            field="type",
        )
    return picked or None


def _relation(r: Relation) -> dict[str, Any]:
    return {
        "relation_id": r.relation_id,
        "type": r.type,
        "src": r.src,
        "dst": r.dst,
        "strength": r.strength,
        "confidence": r.confidence,
        "valid_from": r.valid_from,
        "valid_to": r.valid_to,
        "ended_by": r.ended_by,
        "evidence": r.evidence,
        "session_ids": list(r.session_ids),
    }


def _entity(graph: UserGraph, e: Entity) -> dict[str, Any]:
    aliases = sorted(a.alias for a in graph.aliases.values() if a.entity_id == e.entity_id)
    return {
        "entity_id": e.entity_id,
        "name": e.name,
        "type": e.type,
        "aliases": aliases,
        "mention_count": e.mention_count,
        "first_seen": e.first_seen,
        "last_seen": e.last_seen,
        "speaker": e.speaker,
    }


@dataclass(frozen=True)
class Neighbour:
    node_id: str
    kind: str  # "entity" | "memory"
    name: str  # the entity's name, or the start of the memory's text
    type: str  # the entity's type, or the memory's kind
    depth: int
    relation: dict[str, Any]  # the relation that reached it from a node one hop nearer


@dataclass(frozen=True)
class GraphAnswer:
    app_name: str
    user_id: str
    entity: dict[str, Any]
    depth: int
    types: list[str] | None
    at: float | None
    facts: list[dict[str, Any]]
    neighbours: list[Neighbour]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def close_names(graph: UserGraph, name: str, n: int = 3) -> list[str]:
    names = {e.name for e in graph.entities.values()} | {a.alias for a in graph.aliases.values()}
    by_key = {x.casefold(): x for x in sorted(names)}
    return [by_key[k] for k in difflib.get_close_matches(name.casefold(), list(by_key), n=n)]


def find_entity(graph: UserGraph, entity: str) -> Entity:
    """The entity ``entity`` names (an id, a name or an alias), else NotFound naming
    close matches."""
    if not isinstance(entity, str) or not entity.strip():
        raise InvalidInput("name an entity (a name, an alias or an ent-... id)", field="entity")
    found = graph.entities.get(entity) or graph.find(entity.strip())
    if found is not None:
        return found
    where = f"{graph.app_name}/{graph.user_id}"
    if not graph.entities:
        raise NotFound(
            f"{where} has no entity graph (no session of theirs was "
            f"ingested since the graph was kept)",
            field="entity",
        )
    close = close_names(graph, entity.strip())
    hint = f"; close: {', '.join(close)}" if close else ""
    raise NotFound(f"no entity {entity!r} in the graph of {where}{hint}", field="entity")


def neighbours(
    snap: StoreSnapshot,
    app: str,
    user: str,
    entity: str,
    depth: int = 2,
    types: Sequence[str] | None = None,
    at: float | str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> GraphAnswer:
    """The graph around ``entity`` of (app, user) in snapshot ``snap``."""
    picked = check_query(depth, types, limit)
    when = parse_at(at)
    graph = user_graph(snap, app, user)
    start = find_entity(graph, entity)
    index = snap.graph.index(app, user)  # type: ignore[union-attr]  # user_graph checked
    near = index.neighbours(start.entity_id, depth=depth, types=picked, at=when)
    out: list[Neighbour] = []
    for node, hops, _, rid in near.items(limit=limit + 1):
        if node == start.entity_id or hops < 1:
            continue
        rel = _relation(graph.relations[rid])
        ent = graph.entities.get(node)
        if ent is not None:
            out.append(Neighbour(node, "entity", ent.name, ent.type, hops, rel))
            continue
        mem = snap.get(node, (app, user))
        if mem is not None:  # an expired memory is not shown
            out.append(Neighbour(node, "memory", mem.text[:TEXT_CHARS], mem.kind, hops, rel))
    facts = [
        _relation(r)
        for r in graph.facts(start.entity_id, at=when)
        if picked is None or r.type in picked
    ]
    return GraphAnswer(app, user, _entity(graph, start), depth, picked, when, facts, out[:limit])


def user_graph(snap: StoreSnapshot, app: str, user: str) -> UserGraph:
    """The user's graph in ``snap``; Unsupported for a view that keeps none (LanceDB)."""
    view = getattr(snap, "graph", None)
    if view is None:
        raise Unsupported(f"{FEATURE} needs a Parquet store", field="store")
    return view.user(app, user)


def _require_parquet(store: Any) -> None:
    # Not backend.require_parquet: its message names the store's path, and this one
    # may be answered to an HTTP client. The store says whether it keeps a graph.
    if not getattr(store, "has_graph", False):
        raise Unsupported(
            f"{FEATURE} needs a Parquet store; this is a "
            f"{getattr(store, 'backend', 'different')} store",
            field="store",
        )


class GraphHost(Protocol):
    """What the graph reads need of their service: its store and snapshots."""

    @property
    def store(self) -> object: ...

    def snapshot(self) -> StoreSnapshot: ...


class GraphReads:
    """The graph reads of one :class:`~mnemoray.memory.service.service.MemoryService`
    (``service.graph_reads``)."""

    def __init__(self, service: GraphHost) -> None:
        self.service = service

    def graph(self, app_name: str, user_id: str) -> UserGraph:
        """The user's entity graph (records: entities, aliases, relations), the caller's
        to change."""
        _require_parquet(self.service.store)
        g = user_graph(self.service.snapshot(), app_name, user_id)
        # A copy: the snapshot's one is shared by every reader (records are frozen).
        return UserGraph(
            app_name, user_id, g.entities.values(), g.aliases.values(), g.relations.values()
        )

    def neighbours(
        self,
        app_name: str,
        user_id: str,
        entity: str,
        depth: int = 2,
        types: Sequence[str] | None = None,
        at: float | str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> GraphAnswer:
        """What is within ``depth`` hops of ``entity`` in the user's graph (relations of
        ``types``, valid at ``at``), with the entity's facts."""
        _require_parquet(self.service.store)
        return neighbours(
            self.service.snapshot(), app_name, user_id, entity, depth, types, at, limit
        )


__all__ = [
    "GraphAnswer",
    "GraphHost",
    "GraphReads",
    "Neighbour",
    "check_query",
    "close_names",
    "find_entity",
    "neighbours",
    "parse_at",
    "user_graph",
]
