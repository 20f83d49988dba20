"""The commit step of a backfill, the same for both engines.

A batch of distilled, embedded sessions becomes a :class:`Chunk`: its rows
prepared by the store (``prepare_segments`` of any
:class:`~mnemoray.memory.store.protocol.MemoryBackend`; on the Parquet store, segment files
no manifest lists yet), the ledger keys of every session in it, and what
superseding needs. ``commit_chunk`` then drops the rows of sessions the
store already holds a NEWER copy of (decided by the session version the records
carry, never by the order copies are read or committed: an older copy in a later
batch, file or run is ledgered and replaces nothing), forgets the stored records
the other sessions replace (a session re-archived with more events keeps one
summary) and publishes the rows AND the ledger entries (and, on a store that keeps a
graph, ``has_graph``, the sessions' entity graph evidence) in one ``commit`` (the
Parquet store: one atomic manifest rename, so a job killed anywhere has committed a
session's memories and its ledger entry together or neither, and ``gc`` removes the
prepared files nobody committed; the LanceDB store: memories then ledger, see
:mod:`mnemoray.memory.store.lance.store`). A re-run redoes exactly the unledgered sessions
and never writes a memory twice.

The Ray engine prepares chunks in worker tasks and commits them on the driver,
in archive order; the in-process engine does both in one process. Preparing a chunk
also merges its sessions into their users' entity graphs (``prepare_graph``), so the
serial commit only lists those parts where they still hold
(``mnemoray.memory.store.graph.prepared``) and merges the rest itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnemoray.backfill.steps import SessionItem, older_copies, superseded_for
from mnemoray.faults import crash_point
from mnemoray.graph import SessionExtract
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.graph.prepared import PreparedPart
from mnemoray.memory.store.protocol import MemoryBackend, PreparedWrite
from mnemoray.memory.store.writes import WriteResult

SessionKey = tuple[str, str, str]


@dataclass(frozen=True)
class Chunk:
    """One prepared commit unit (picklable: Ray workers hand it to the driver).

    ``stats``: rows ``read``, ``skipped``, ``quarantined`` on the way to this chunk,
    busy ``seconds`` per stage and the ``summarizer`` name.
    """

    pending: PreparedWrite | None
    hashes: tuple[str, ...]  # ledger keys of every session of the chunk
    # Current sessions with new records (no embeddings): what superseding compares.
    refs: tuple[tuple[SessionKey, tuple[Memory, ...]], ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    # (ledger key, graph extract) of each current session: merged into the users' entity
    # graphs in the same commit (a store with ``has_graph``; docs/graph.md, "Integration").
    graph: tuple[tuple[str, SessionExtract], ...] = ()
    # That merge done where the chunk was prepared (uncommitted parts): the commit lists
    # them where they still hold, and merges only the shards they do not cover.
    prepared_graph: tuple[PreparedPart, ...] = ()

    @property
    def prepared_segments(self) -> int:
        return self.pending.segment_count if self.pending is not None else 0


def make_chunk(
    store: MemoryBackend,
    items: Sequence[SessionItem],
    model: str | None,
    dim: int,
    stats: Mapping[str, Any],
) -> Chunk:
    """Write the items' segments (uncommitted) and return the chunk to commit."""
    memories = [m for item in items for m in item.memories]
    pending = None
    if memories:
        if model is None:
            raise RuntimeError("make_chunk: memories arrived without an embedding model")
        pending = store.prepare_segments(memories, model, dim)
    refs = tuple(
        (item.session.key, tuple(m.with_derived(embedding=None) for m in item.memories))
        for item in items
        if item.current and item.memories
    )
    graph = graph_extracts(items) if store.has_graph else ()
    return Chunk(
        pending,
        tuple(item.raw_hash for item in items),
        refs,
        dict(stats),
        graph,
        prepare_graph(store, graph),
    )


def graph_extracts(items: Sequence[SessionItem]) -> tuple[tuple[str, SessionExtract], ...]:
    """(ledger key, graph evidence) of each current session, read where it was distilled
    (``distill_sessions``, a Ray worker included: later stages drop the events)."""
    return tuple(
        (item.raw_hash, item.graph) for item in items if item.current and item.graph is not None
    )


def prepare_graph(
    store: MemoryBackend,
    graph: tuple[tuple[str, SessionExtract], ...],
) -> tuple[PreparedPart, ...]:
    """The entity-graph merge of ``graph``, done here (in parallel workers on Ray) so the
    driver's serial commit only lists its parts (``mnemoray.memory.store.graph.prepared``)."""
    if not graph:
        return ()
    return store.prepare_graph(graph)


def sessions_with_rows(store: MemoryBackend, keys: set[SessionKey]) -> set[SessionKey]:
    """Of ``keys``, the sessions the store holds rows of (live or not): a first backfill
    (no session stored yet) never loads a snapshot just to find nothing to supersede."""
    return store.sessions_with_rows(keys)


def commit_chunk(
    store: MemoryBackend, chunk: Chunk, *, run_id: str, summarizer: str | None
) -> WriteResult:
    """Supersede, then commit the chunk's rows and ledger entries in one ``commit``."""
    if chunk.prepared_segments:
        crash_point("prepare")  # segment files written, nothing committed yet
    pending, graph = chunk.pending, chunk.graph
    stored = sessions_with_rows(store, {key for key, _ in chunk.refs})
    if stored:
        snap = store.load()
        refs = [r for r in chunk.refs if r[0] in stored]
        older = older_copies(snap, refs)
        if older:  # ledgered below, but their rows are not published
            pending = drop_sessions(store, pending, older)
            graph = tuple(
                g for g in graph if (g[1].app_name, g[1].user_id, g[1].session_id) not in older
            )
        replaced = superseded_for(snap, [r for r in refs if r[0] not in older])
        if replaced:  # before the commit: a run killed in between redoes these sessions
            store.forget(owned=replaced)
    # Only a graph-keeping store's chunks carry a graph (prepared parts not taken are removed).
    result = store.commit(
        pending,
        session_hashes=chunk.hashes,
        run_id=run_id,
        summarizer=summarizer,
        graph=graph,
        prepared_graph=chunk.prepared_graph,
    )
    crash_point("commit")
    return result


def drop_sessions(
    store: MemoryBackend, pending: PreparedWrite | None, sessions: set[SessionKey]
) -> PreparedWrite | None:
    """``pending`` without the rows of ``sessions`` (still uncommitted)."""
    return store.drop_sessions(pending, sessions)


__all__ = [
    "Chunk",
    "commit_chunk",
    "drop_sessions",
    "make_chunk",
    "prepare_graph",
    "sessions_with_rows",
]
