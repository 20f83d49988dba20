"""A backfill's entity-graph merge, done where its chunk is prepared.

A commit merges the sessions it publishes into their users' graphs (``merge_extracts``)
under the store's lock, one commit at a time: in a backfill that serial step on the
driver bounded the whole job however many workers prepared chunks. ``prepare_parts``
does the same merge (``merged_graph``, the same code) where the chunk is prepared (a
Ray worker, or the in-process loop before its commit), onto the users' graphs of the
manifest it reads, and writes one uncommitted part per shard. The commit
(``take_prepared``) lists such a part as written when merging there would give the
same rows, that is when:

- it merges the same sessions into that shard (an older copy, or a session already
  ledgered, is dropped at commit: not the same sessions);
- no part listed since the prepare read the shard names one of the part's users (a
  part holds the whole graphs of the users it names, so their graphs are unchanged);
  and, where a part the prepare read is gone (a merge rewrote the shard, dropping
  forgotten users for good), none of the users had a graph when it was read.

Otherwise that shard's sessions are merged at commit (the same merge, reading only the
parts that name their users) and the part's files are removed (an unlisted part of a
crashed run goes at ``gc``): the graph is the same either way, only where the work runs
differs. An archive whose users' sessions are spread over many chunks that are prepared
at once falls back more often.

The other serial graph work of a commit is merging a shard's parts into one once it holds
``MAX_PARTS``. A prepare that finds the shard near that also writes the shard's rows as
one part (``rollup``); the commit puts it in place of the parts it was read from while
they still lead the shard's list (parts listed after them stay after it: each user reads
the same rows), and removes it otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.graph import SessionExtract
from mnemoray.memory.store.graph.commit import GraphWrite, by_shard_of, merged_graph
from mnemoray.memory.store.graph.parts import (
    MAX_PARTS,
    USERS,
    Reader,
    empty_tables,
    list_merged,
    must_merge,
    part_files,
    part_path,
    read_part,
    resolve_parts,
    write_part,
    write_rows,
)
from mnemoray.memory.store.graph.tables import TABLES
from mnemoray.memory.store.manifest import GraphPart, Manifest
from mnemoray.weighed_cache import WeighedCache

Owner = tuple[str, str]
log = logging.getLogger(__name__)
# The user lists of parts kept in memory (a part's files never change), counted in users
# named, not parts: a merged part names every user of its shard, ~200 bytes each as a
# set entry, so a count of parts would let a long backfill keep gigabytes.
KEEP_USERS = 200_000


@dataclass(frozen=True)
class PreparedPart:
    """One shard's merged graphs, written but listed by no manifest (picklable)."""

    shard: int
    shards: int  # the store's shard count it was placed with
    name: str  # the part's files
    users: tuple[Owner, ...]  # whose whole graphs it holds, sorted
    sessions: frozenset[str]  # ledger keys of the sessions merged into them
    base: tuple[str, ...]  # the shard's parts the merge read its users' graphs from
    had_graph: bool  # some of ``users`` had a graph in ``base``
    # The shard's rows at ``base`` as one part, written when ``base`` is near the most
    # parts a shard holds: the commit puts it in place of ``base`` while those are still
    # listed (the merge ``publish`` would otherwise do on the committing process).
    rollup: GraphPart | None = None


# -- which users a part names (read once per process) ---------------------------------------
def _user_lists(budget: int = KEEP_USERS) -> WeighedCache[tuple[str, int, str], frozenset[Owner]]:
    # A part naming over a quarter of the budget is read again rather than kept.
    return WeighedCache(budget, weigh=len, max_item=budget // 4)


_users = _user_lists()


def part_users(root: Path, shard: int, name: str) -> frozenset[Owner]:
    key = (str(root), shard, name)
    found = _users.get(key)
    if found is not None:
        return found
    table = pq.read_table(part_path(root, shard, name, USERS))
    return _users.put(
        key,
        frozenset(zip(table["app_name"].to_pylist(), table["user_id"].to_pylist(), strict=True)),
    )


# -- prepare (a worker) --------------------------------------------------------------------
def prepare_parts(root: Path, m: Manifest, graph: GraphWrite) -> tuple[PreparedPart, ...]:
    """Merge ``graph`` ((ledger key, extract) pairs) onto the users' graphs at ``m``: one
    uncommitted part per shard. A shard that cannot be prepared (a part removed by a
    commit meanwhile, ...) is left to the commit (logged)."""
    by_shard, keys = by_shard_of(graph, m.shards)
    out = []
    for shard, owners in sorted(by_shard.items()):
        try:
            out.append(_prepare(root, m, shard, owners, frozenset(keys[shard]), rollup=True))
        except (OSError, pa.ArrowException, StoreCorrupt) as exc:
            log.info("graph of shard %d left to the commit: %s: %s", shard, type(exc).__name__, exc)
    return tuple(out)


def _prepare(
    root: Path,
    m: Manifest,
    shard: int,
    owners: dict[Owner, list[SessionExtract]],
    sessions: frozenset[str],
    *,
    rollup: bool = False,
) -> PreparedPart:
    users = sorted(owners)
    wanted = set(users)
    base = m.graph[shard]
    # A user's rows are in the parts that name it (the newest wins): only those are read.
    holding = [p for p in base if part_users(root, shard, p.name) & wanted]
    stored = resolve_parts(read_part(root, shard, p) for p in holding)[0] if holding else None
    rolled = None
    # One commit early: chunks prepared ahead of their commits reach the limit in between.
    if rollup and len(base) + 2 >= MAX_PARTS:
        stored = resolve_parts(read_part(root, shard, p) for p in base)[0]
        rolled = write_rows(root, shard, empty_tables(), (), base=stored)
    graphs = [merged_graph(app, user, stored, owners[(app, user)]) for app, user in users]
    part = write_part(root, shard, graphs)
    _users.put((str(root), shard, part.name), frozenset(users))
    return PreparedPart(
        shard,
        m.shards,
        part.name,
        tuple(users),
        sessions,
        tuple(p.name for p in base),
        bool(holding),
        rolled,
    )


# -- commit (under the store's lock) -------------------------------------------------------
def take_prepared(
    root: Path,
    m: Manifest,
    prepared: Sequence[PreparedPart],
    graph: GraphWrite,
    read: Reader | None = None,
) -> int:
    """List in ``m`` each prepared part whose rows are what merging ``graph`` (what this
    commit publishes) gives, and merge the other shards' sessions here, reading only the
    parts that name their users (parts not listed are removed). Returns how many
    sessions were merged here."""
    by_shard, keys = by_shard_of(graph, m.shards)
    for p in prepared:
        holds = (
            p.shards == m.shards
            and p.shard in by_shard
            and p.sessions == keys[p.shard]
            and _unchanged(root, m, p)
            and _on_disk(root, p.shard, _part(p))
        )
        if p.rollup is not None:
            _roll_up(root, m, p, p.rollup)
        if holds:
            _list(root, m, p, read)
            del by_shard[p.shard]
        else:
            _remove(root, p.shard, _part(p))
    for shard, owners in sorted(by_shard.items()):
        _list(root, m, _prepare(root, m, shard, owners, frozenset(keys[shard])), read)
    return sum(len(group) for owners in by_shard.values() for group in owners.values())


def _part(p: PreparedPart, version: int = 0) -> GraphPart:
    return GraphPart(p.name, len(p.users), version)


def _unchanged(root: Path, m: Manifest, p: PreparedPart) -> bool:
    """Whether the graphs of ``p``'s users at ``m`` are those its merge read."""
    now = [q.name for q in m.graph[p.shard]]
    base = set(p.base)
    if p.had_graph and not base <= set(now):
        return False
    wanted = set(p.users)
    return not any(part_users(root, p.shard, name) & wanted for name in now if name not in base)


def _on_disk(root: Path, shard: int, part: GraphPart) -> bool:
    return all(f.is_file() for f in part_files(root, shard, part))


def _roll_up(root: Path, m: Manifest, p: PreparedPart, rollup: GraphPart) -> None:
    """Put ``rollup`` in place of the parts it was read from while ``m`` still lists
    them first (else remove it). Each user then reads the same rows: those of the newest
    part naming it, and the rollup names every user with rows at ``p.base``."""
    parts = m.graph[p.shard] if p.shards == m.shards else []
    if (
        p.base
        and [q.name for q in parts[: len(p.base)]] == list(p.base)
        and _on_disk(root, p.shard, rollup)
    ):
        m.graph[p.shard] = [replace(rollup, version=m.version + 1), *parts[len(p.base) :]]
    else:
        _remove(root, p.shard, rollup)


def _list(root: Path, m: Manifest, p: PreparedPart, read: Reader | None) -> None:
    """``p`` in ``m`` at its next version, as ``publish`` lists a part it writes (a shard
    at its most parts: one merged part, then ``p``'s files go)."""
    if must_merge(m, p.shard):
        fresh = read_part(root, p.shard, _part(p))
        list_merged(root, m, p.shard, {t: fresh[t] for t in TABLES}, p.users, p.users, read)
        _remove(root, p.shard, _part(p))
        return
    m.graph[p.shard] = [*m.graph[p.shard], _part(p, m.version + 1)]


def _remove(root: Path, shard: int, part: GraphPart) -> None:
    for f in part_files(root, shard, part):
        f.unlink(missing_ok=True)


def discard(root: Path, prepared: Sequence[PreparedPart]) -> None:
    """Remove the files of parts no manifest lists (a commit that did not take them)."""
    for p in prepared:
        _remove(root, p.shard, _part(p))
        if p.rollup is not None:
            _remove(root, p.shard, p.rollup)


__all__ = ["PreparedPart", "discard", "part_users", "prepare_parts", "take_prepared"]
