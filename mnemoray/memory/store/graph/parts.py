"""The entity graph inside a memory store: per shard, parts that the manifest lists.

```
STORE/graph/shard=NNNN/<part>.entities.parquet    rows of the part's users
STORE/graph/shard=NNNN/<part>.aliases.parquet
STORE/graph/shard=NNNN/<part>.relations.parquet
STORE/graph/shard=NNNN/<part>.users.parquet       (app_name, user_id) it holds whole
```

A commit that changes some users' graphs writes ONE new part per shard touched with
those users' whole graphs (not the shard's, not the store's) and lists it in the
same manifest as the memories and ledger entries, so a crash leaves both or neither
(unlisted parts are removed by ``MemoryStore.gc``). A user's graph is the rows of the
newest part that lists the user: a forgotten user is listed with no rows. Once a
shard has ``MAX_PARTS`` parts the commit writes one merged part instead, so a read
opens a bounded number of files. Rows are in the schema of
:mod:`mnemoray.memory.store.graph.tables`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray.errors import StoreCorrupt
from mnemoray.files import atomic_write
from mnemoray.graph import UserGraph
from mnemoray.memory.store.graph.tables import SCHEMAS, TABLES, graph_from_tables, shard_tables
from mnemoray.memory.store.layout import new_name, repair_hint, shard_dir
from mnemoray.memory.store.manifest import GraphPart, Manifest

GRAPH_DIR = "graph"
MAX_PARTS = 8
USERS = "users"
PART_TABLES = (*TABLES, USERS)
USERS_SCHEMA = pa.schema([("app_name", pa.string()), ("user_id", pa.string())])
Owner = tuple[str, str]
Tables = dict[str, pa.Table]
# Reads a shard's graph rows at a manifest (the store passes its cache of loaded shards).
Reader = Callable[[Manifest, int], Tables]


def part_path(root: Path, shard: int, name: str, table: str) -> Path:
    return root / GRAPH_DIR / shard_dir(shard) / f"{name}.{table}.parquet"


def part_files(root: Path, shard: int, part: GraphPart) -> list[Path]:
    return [part_path(root, shard, part.name, t) for t in PART_TABLES]


def empty_tables() -> Tables:
    return {t: SCHEMAS[t].empty_table() for t in TABLES}


def _owner_keys(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(table["app_name"], table["user_id"], "\x1f")


def _key(app: str, user: str) -> str:
    return f"{app}\x1f{user}"


def read_part(
    root: Path, shard: int, part: GraphPart, columns: Mapping[str, list[str]] | None = None
) -> Tables:
    """One part's four tables; a listed file that is missing or unreadable is corrupt."""
    out: Tables = {}
    for t in PART_TABLES:
        path = part_path(root, shard, part.name, t)
        try:
            out[t] = pq.read_table(path, columns=(columns or {}).get(t))
        except (OSError, pa.ArrowException) as exc:
            raise StoreCorrupt(
                f"graph part {part.name} of shard {shard}: cannot read {path} "
                f"({exc}); {repair_hint(root)}"
            ) from exc
    return out


def resolve_parts(parts: Iterable[Tables]) -> tuple[Tables, set[Owner]]:
    """The rows that hold (each user's newest part wins; ``parts`` oldest first) and the
    users any part lists (those with no rows were forgotten)."""
    claimed: set[str] = set()
    owners: set[Owner] = set()
    chosen: dict[str, list[pa.Table]] = {t: [] for t in TABLES}
    for tables in reversed(list(parts)):
        users = tables[USERS]
        keys = [
            _key(a, u)
            for a, u in zip(
                users["app_name"].to_pylist(), users["user_id"].to_pylist(), strict=True
            )
        ]
        owners.update(zip(users["app_name"].to_pylist(), users["user_id"].to_pylist(), strict=True))
        wins = [k for k in keys if k not in claimed]
        claimed.update(wins)
        if not wins:
            continue
        allowed = pa.array(wins, pa.string())
        for t in TABLES:
            table = tables[t]
            if table.num_rows:
                chosen[t].append(table.filter(pc.is_in(_owner_keys(table), value_set=allowed)))
    resolved = {t: pa.concat_tables(chosen[t][::-1]) if chosen[t] else None for t in TABLES}
    return (
        {t: v if v is not None else SCHEMAS[t].empty_table() for t, v in resolved.items()},
        owners,
    )


def read_shard(root: Path, m: Manifest, shard: int) -> Tables:
    """The shard's graph rows that hold at manifest ``m`` (all users of the shard)."""
    return resolve_parts(read_part(root, shard, p) for p in m.graph[shard])[0]


def user_graph(root: Path, m: Manifest, shard: int, app: str, user: str) -> UserGraph:
    return graph_from_tables(app, user, read_shard(root, m, shard))


def write_part(
    root: Path,
    shard: int,
    graphs: Iterable[UserGraph],
    forgotten: Iterable[Owner] = (),
    base: Tables | None = None,
) -> GraphPart:
    """Write a new (uncommitted) part: the whole graphs of ``graphs``' users, the users
    ``forgotten`` with no rows, and ``base`` (rows of other users carried over when a
    merge rewrites the shard). The caller lists it in the manifest it commits."""
    graphs = list(graphs)
    owners = [(g.app_name, g.user_id) for g in graphs] + list(forgotten)
    return write_rows(root, shard, shard_tables(graphs), owners, base)


def write_rows(
    root: Path, shard: int, fresh: Tables, owners: Iterable[Owner], base: Tables | None = None
) -> GraphPart:
    """``write_part`` from rows: ``fresh`` (the three tables) holds the whole graphs of
    ``owners`` (a user listed with no rows is forgotten)."""
    listed = dict.fromkeys(owners)
    tables: Tables = {}
    for t in TABLES:
        parts = [fresh[t].cast(SCHEMAS[t])]
        if base is not None and base[t].num_rows:
            keep = pc.invert(
                pc.is_in(
                    _owner_keys(base[t]),
                    value_set=pa.array([_key(a, u) for a, u in listed], pa.string()),
                )
            )
            parts.insert(0, base[t].filter(keep).cast(SCHEMAS[t]))
        tables[t] = pa.concat_tables(parts)
    if base is not None:  # a merged part lists every user it holds rows of
        for t in TABLES:
            listed.update(
                dict.fromkeys(
                    zip(
                        tables[t]["app_name"].to_pylist(),
                        tables[t]["user_id"].to_pylist(),
                        strict=True,
                    )
                )
            )
    tables[USERS] = pa.Table.from_pylist(
        [{"app_name": a, "user_id": u} for a, u in listed], schema=USERS_SCHEMA
    )
    name = new_name("graph")
    for t in PART_TABLES:
        table = tables[t]
        atomic_write(part_path(root, shard, name, t), functools.partial(pq.write_table, table))
    return GraphPart(name, len(listed), 0)


def publish(
    root: Path,
    m: Manifest,
    shard: int,
    graphs: list[UserGraph],
    forgotten: Iterable[Owner] = (),
    read: Reader | None = None,
) -> None:
    """Write the part for ``graphs`` (and ``forgotten`` users) and list it in ``m`` at
    its next version (``m`` is then written by the caller's commit). A shard at
    ``MAX_PARTS`` is merged into one part (its forgotten users dropped for good).
    ``read``: the shard's rows at ``m`` (the store's cache; default: read the files)."""
    forgotten = list(forgotten)
    if must_merge(m, shard):
        listed = [(g.app_name, g.user_id) for g in graphs]
        list_merged(root, m, shard, shard_tables(graphs), listed, listed + forgotten, read)
        return
    part = write_part(root, shard, graphs, forgotten)
    m.graph[shard] = [*m.graph[shard], GraphPart(part.name, part.users, m.version + 1)]


def must_merge(m: Manifest, shard: int) -> bool:
    """Whether the shard's next part is one merged part (it holds ``MAX_PARTS`` - 1)."""
    return len(m.graph[shard]) + 1 >= MAX_PARTS


def list_merged(
    root: Path,
    m: Manifest,
    shard: int,
    fresh: Tables,
    listed: Iterable[Owner],
    gone: Iterable[Owner],
    read: Reader | None = None,
) -> None:
    """Replace the shard's parts in ``m`` by one: its rows at ``m`` but those of ``gone``
    (a forgotten user's dropped for good), then ``fresh``, the whole graphs of
    ``listed``."""
    base = read(m, shard) if read is not None else read_shard(root, m, shard)
    part = write_rows(root, shard, fresh, listed, base=_without(base, set(gone)))
    m.graph[shard] = [GraphPart(part.name, part.users, m.version + 1)]


def _without(tables: Tables, owners: set[Owner]) -> Tables:
    if not owners:
        return tables
    drop = pa.array([_key(a, u) for a, u in owners], pa.string())
    return {
        t: tables[t].filter(pc.invert(pc.is_in(_owner_keys(tables[t]), value_set=drop)))
        for t in TABLES
    }


def listed_files(root: Path, m: Manifest) -> set[Path]:
    """Every graph file the manifest lists (what ``gc`` keeps)."""
    return {
        f for shard, parts in enumerate(m.graph) for p in parts for f in part_files(root, shard, p)
    }


def drop_unlisted(root: Path, before: list[list[GraphPart]], m: Manifest) -> None:
    """Remove the files of parts ``before`` listed that committed ``m`` no longer lists
    (a merge replaced them). Called under the store's lock after the commit; snapshots
    hold their graph in memory, as they hold their segments."""
    now = {(shard, p.name) for shard, parts in enumerate(m.graph) for p in parts}
    for shard, parts in enumerate(before):
        for p in parts:
            if (shard, p.name) not in now:
                for f in part_files(root, shard, p):
                    f.unlink(missing_ok=True)


def graph_users(root: Path, m: Manifest, shard: int) -> list[Owner]:
    """The users with graph rows in ``shard`` (sorted)."""
    tables = read_shard(root, m, shard)
    ents = tables["entities"]
    return sorted(set(zip(ents["app_name"].to_pylist(), ents["user_id"].to_pylist(), strict=True)))


__all__ = [
    "GRAPH_DIR",
    "MAX_PARTS",
    "Reader",
    "drop_unlisted",
    "empty_tables",
    "graph_users",
    "list_merged",
    "listed_files",
    "must_merge",
    "publish",
    "read_part",
    "read_shard",
    "resolve_parts",
    "user_graph",
    "write_part",
    "write_rows",
]
