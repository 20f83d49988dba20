"""What a memory store commit does to the entity graph (called under the store's lock).

``merge_extracts``: the sessions a commit publishes are merged into their users'
graphs (``mnemoray.graph.UserGraph.add_session``, in time order), and one part per
shard touched is written and listed in the manifest being committed.
``forget_in_graph``: a forget removes what it covers from the graph in the same
manifest as its tombstones: a session's evidence (what it alone supports goes), a
user's whole graph, or the relations of forgotten memories.
``import_graph_rows``: exported graph rows added to a store (records already there
are kept as they are).

All three change ``m`` (the manifest the caller writes) and return whether they did;
files they write are unlisted until then (``gc`` removes those of a crashed commit).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa

from mnemoray.graph import SessionExtract, UserGraph, extract_session
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.graph.parts import Reader, read_shard
from mnemoray.memory.store.graph.parts import publish as publish_part
from mnemoray.memory.store.graph.tables import SCHEMAS, TABLES, graph_from_tables
from mnemoray.memory.store.layout import shard_of
from mnemoray.memory.store.manifest import Manifest
from mnemoray.sessions.session import Session

Owner = tuple[str, str]
log = logging.getLogger(__name__)
# What a commit merges: (ledger hash of the session, its graph extract) pairs.
GraphWrite = Sequence[tuple[str, SessionExtract]]


def safe_extract(session: Session, memories: Sequence[Memory]) -> SessionExtract | None:
    """The session's graph evidence, or None when the extractor fails on it: its memories
    are still committed (logged: the graph then lacks that session)."""
    try:
        return extract_session(session, memories)
    except Exception as exc:  # any extractor failure must not lose the session's memories
        log.warning(
            "graph extraction failed for session %s/%s/%s: %s: %s",
            *session.key,
            type(exc).__name__,
            exc,
        )
        return None


def _read(root: Path, m: Manifest, shard: int, read: Reader | None) -> dict[str, pa.Table]:
    """The shard's graph rows at ``m`` (``read``: the store's cache of loaded shards)."""
    return read(m, shard) if read is not None else read_shard(root, m, shard)


def _has_graph(m: Manifest, shard: int) -> bool:
    return bool(m.graph[shard])


def by_shard_of(
    graph: GraphWrite, shards: int
) -> tuple[dict[int, dict[Owner, list[SessionExtract]]], dict[int, set[str]]]:
    """The sessions' extracts per shard and owner, and their ledger keys per shard."""
    by_shard: dict[int, dict[Owner, list[SessionExtract]]] = defaultdict(lambda: defaultdict(list))
    keys: dict[int, set[str]] = defaultdict(set)
    for key, ex in graph:
        shard = shard_of(ex.app_name, ex.user_id, shards)
        by_shard[shard][(ex.app_name, ex.user_id)].append(ex)
        keys[shard].add(key)
    return by_shard, keys


def merge_extracts(root: Path, m: Manifest, graph: GraphWrite, read: Reader | None = None) -> bool:
    """Merge ``graph`` ((ledger key, extract) pairs) into their users' graphs and list
    the parts in ``m``."""
    by_shard, _ = by_shard_of(graph, m.shards)
    for shard, owners in sorted(by_shard.items()):
        stored = _read(root, m, shard, read) if _has_graph(m, shard) else None
        graphs = [
            merged_graph(app, user, stored, group) for (app, user), group in sorted(owners.items())
        ]
        publish_part(root, m, shard, graphs, read=read)
    return bool(by_shard)


def merged_graph(
    app: str, user: str, stored: dict[str, pa.Table] | None, group: list[SessionExtract]
) -> UserGraph:
    """The user's stored graph with ``group`` added in time order (which keeps resolution
    deterministic: docs/graph.md, "Resolution"). A session the merge fails on is left
    out (logged), so it cannot stop the commit of the memories; the graph is rebuilt
    without it, never left half-changed."""
    ordered = sorted(group, key=lambda e: (e.at, e.session_id))
    skip: set[str] = set()
    while True:
        graph = graph_from_tables(app, user, stored) if stored is not None else UserGraph(app, user)
        for ex in ordered:
            if ex.session_id in skip:
                continue
            try:
                graph.add_session(ex)
            except Exception as exc:  # a merge bug must not cost the session its memories
                log.warning(
                    "graph merge failed for session %s/%s/%s: %s: %s",
                    app,
                    user,
                    ex.session_id,
                    type(exc).__name__,
                    exc,
                )
                skip.add(ex.session_id)
                break
        else:
            return graph


def forget_in_graph(
    root: Path,
    m: Manifest,
    memories: Iterable[tuple[str, str, str]] = (),
    session: tuple[str, str, str] | None = None,
    user: Owner | None = None,
    read: Reader | None = None,
) -> bool:
    """Remove from the graph what a forget covers; True when ``m`` lists new parts."""
    changed = False
    if user is not None:
        shard = shard_of(*user, m.shards)
        if _has_graph(m, shard) and _holds(_read(root, m, shard, read), user):
            publish_part(root, m, shard, [], forgotten=[user], read=read)
            changed = True
    by_owner: dict[Owner, set[str]] = defaultdict(set)
    for app, uid, memory_id in memories:
        by_owner[(app, uid)].add(memory_id)
    owners = set(by_owner) | ({session[:2]} if session is not None else set())
    for owner in sorted(owners):
        if owner == user:
            continue  # already gone whole
        shard = shard_of(*owner, m.shards)
        if not _has_graph(m, shard):
            continue
        graph = graph_from_tables(*owner, _read(root, m, shard, read))
        touched = False
        if session is not None and session[:2] == owner:
            touched = graph.forget_session(session[2])
        touched = _drop_memories(graph, by_owner.get(owner, set())) or touched
        if touched:
            publish_part(root, m, shard, [graph], read=read)
            changed = True
    return changed


def _holds(tables: dict[str, pa.Table], owner: Owner) -> bool:
    return any(
        a == owner[0] and u == owner[1]
        for t in TABLES
        for a, u in zip(
            tables[t]["app_name"].to_pylist(), tables[t]["user_id"].to_pylist(), strict=True
        )
    )


def _drop_memories(graph: UserGraph, memory_ids: set[str]) -> bool:
    """Relations that join a forgotten memory go with it (its node is gone)."""
    if not memory_ids:
        return False
    gone = [
        rid
        for rid, r in graph.relations.items()
        if (r.src_kind == "memory" and r.src in memory_ids)
        or (r.dst_kind == "memory" and r.dst in memory_ids)
    ]
    for rid in gone:
        del graph.relations[rid]
    return bool(gone)


def import_graph_rows(
    root: Path, m: Manifest, rows: dict[str, list[dict]], read: Reader | None = None
) -> bool:
    """Add exported graph rows (``rows``: table -> row dicts of any users): per user,
    records whose ids the store does not hold yet; an import run again adds nothing."""
    by_shard: dict[int, dict[str, list[dict]]] = defaultdict(lambda: {t: [] for t in TABLES})
    for t in TABLES:
        for row in rows.get(t, ()):
            by_shard[shard_of(row["app_name"], row["user_id"], m.shards)][t].append(row)
    changed = False
    for shard, tables in sorted(by_shard.items()):
        incoming = {t: pa.Table.from_pylist(tables[t], schema=SCHEMAS[t]) for t in TABLES}
        stored = _read(root, m, shard, read) if _has_graph(m, shard) else None
        owners = sorted({(r["app_name"], r["user_id"]) for t in TABLES for r in tables[t]})
        graphs = []
        for app, user in owners:
            new = graph_from_tables(app, user, incoming)
            graph = (
                graph_from_tables(app, user, stored) if stored is not None else UserGraph(app, user)
            )
            added = _union(graph, new)
            if added:
                graphs.append(
                    UserGraph(
                        app,
                        user,
                        graph.entities.values(),
                        graph.aliases.values(),
                        graph.relations.values(),
                    )
                )
        if graphs:
            publish_part(root, m, shard, graphs, read=read)
            changed = True
    return changed


def _union(graph: UserGraph, new: UserGraph) -> bool:
    added = False
    for attr in ("entities", "aliases", "relations"):
        mine, theirs = getattr(graph, attr), getattr(new, attr)
        for key, record in theirs.items():
            if key not in mine:
                mine[key] = record
                added = True
    return added


__all__ = [
    "GraphWrite",
    "by_shard_of",
    "forget_in_graph",
    "import_graph_rows",
    "merge_extracts",
    "merged_graph",
    "safe_extract",
]
