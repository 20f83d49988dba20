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
differs. An archive whose users' sessions are
spread over many chunks that are prepared at once falls back more often.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.graph import SessionExtract
from mnemoray.graph.tables import TABLES
from mnemoray.memory.graph_commit import GraphWrite, merged_graph
from mnemoray.memory.graph_parts import (
    USERS,
    Reader,
    list_merged,
    must_merge,
    part_files,
    part_path,
    read_part,
    resolve_parts,
    write_part,
)
from mnemoray.memory.layout import shard_of
from mnemoray.memory.manifest import GraphPart, Manifest

Owner = tuple[str, str]
log = logging.getLogger(__name__)
KEEP_USERS = 4096  # parts whose user lists are kept (a part's files never change)


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


# -- which users a part names (read once per process) ---------------------------------------
_users_lock = threading.Lock()
_users: OrderedDict[tuple[str, int, str], frozenset[Owner]] = OrderedDict()


def part_users(root: Path, shard: int, name: str) -> frozenset[Owner]:
    key = (str(root), shard, name)
    with _users_lock:
        found = _users.get(key)
    if found is not None:
        return found
    table = pq.read_table(part_path(root, shard, name, USERS))
    users = frozenset(zip(table["app_name"].to_pylist(), table["user_id"].to_pylist(),
                          strict=True))
    _remember(key, users)
    return users


def _remember(key: tuple[str, int, str], users: frozenset[Owner]) -> None:
    with _users_lock:
        _users[key] = users
        while len(_users) > KEEP_USERS:
            _users.popitem(last=False)


# -- prepare (a worker) --------------------------------------------------------------------
def prepare_parts(root: Path, m: Manifest, graph: GraphWrite) -> tuple[PreparedPart, ...]:
    """Merge ``graph`` ((ledger key, extract) pairs) onto the users' graphs at ``m``: one
    uncommitted part per shard. A shard that cannot be prepared (a part removed by a
    commit meanwhile, ...) is left to the commit (logged)."""
    by_shard: dict[int, dict[Owner, list[SessionExtract]]] = defaultdict(
        lambda: defaultdict(list))
    keys: dict[int, set[str]] = defaultdict(set)
    for key, ex in graph:
        shard = shard_of(ex.app_name, ex.user_id, m.shards)
        by_shard[shard][(ex.app_name, ex.user_id)].append(ex)
        keys[shard].add(key)
    out = []
    for shard, owners in sorted(by_shard.items()):
        try:
            out.append(_prepare(root, m, shard, owners, frozenset(keys[shard])))
        except (OSError, pa.ArrowException, StoreCorrupt) as exc:
            log.info("graph of shard %d left to the commit: %s: %s", shard,
                     type(exc).__name__, exc)
    return tuple(out)


def _prepare(root: Path, m: Manifest, shard: int, owners: dict[Owner, list[SessionExtract]],
             sessions: frozenset[str]) -> PreparedPart:
    users = sorted(owners)
    wanted = set(users)
    base = m.graph[shard]
    # A user's rows are in the parts that name it (the newest wins): only those are read.
    holding = [p for p in base if part_users(root, shard, p.name) & wanted]
    stored = resolve_parts(read_part(root, shard, p) for p in holding)[0] if holding else None
    graphs = [merged_graph(app, user, stored, owners[(app, user)]) for app, user in users]
    part = write_part(root, shard, graphs)
    _remember((str(root), shard, part.name), frozenset(users))
    return PreparedPart(shard, m.shards, part.name, tuple(users), sessions,
                        tuple(p.name for p in base), bool(holding))


# -- commit (under the store's lock) -------------------------------------------------------
def take_prepared(root: Path, m: Manifest, prepared: Sequence[PreparedPart],
                  graph: GraphWrite, read: Reader | None = None) -> int:
    """List in ``m`` each prepared part whose rows are what merging ``graph`` (what this
    commit publishes) gives, and merge the other shards' sessions here, reading only the
    parts that name their users (parts not listed are removed). Returns how many
    sessions were merged here."""
    by_shard: dict[int, dict[Owner, list[SessionExtract]]] = defaultdict(
        lambda: defaultdict(list))
    keys: dict[int, set[str]] = defaultdict(set)
    for key, ex in graph:
        shard = shard_of(ex.app_name, ex.user_id, m.shards)
        by_shard[shard][(ex.app_name, ex.user_id)].append(ex)
        keys[shard].add(key)
    for p in prepared:
        if (p.shards == m.shards and p.shard in by_shard and p.sessions == keys[p.shard]
                and _unchanged(root, m, p)
                and all(f.is_file() for f in part_files(root, p.shard, _part(p)))):
            _list(root, m, p, read)
            del by_shard[p.shard]
        else:
            discard(root, [p])
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


def _list(root: Path, m: Manifest, p: PreparedPart, read: Reader | None) -> None:
    """``p`` in ``m`` at its next version, as ``publish`` lists a part it writes (a shard
    at its most parts: one merged part, then ``p``'s files go)."""
    if must_merge(m, p.shard):
        fresh = read_part(root, p.shard, _part(p))
        list_merged(root, m, p.shard, {t: fresh[t] for t in TABLES}, p.users, p.users, read)
        discard(root, [p])
        return
    m.graph[p.shard] = [*m.graph[p.shard], _part(p, m.version + 1)]


def discard(root: Path, prepared: Sequence[PreparedPart]) -> None:
    """Remove the files of parts no manifest lists (a commit that did not take them)."""
    for p in prepared:
        for f in part_files(root, p.shard, _part(p)):
            f.unlink(missing_ok=True)


__all__ = ["PreparedPart", "discard", "part_users", "prepare_parts", "take_prepared"]
