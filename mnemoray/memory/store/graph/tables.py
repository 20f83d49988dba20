"""The graph on disk: entities, aliases and relations as Parquet, sharded like memories.

```
STORE/graph/shard=NNNN/entities-<gen>.parquet    one row per entity of the shard's users
STORE/graph/shard=NNNN/aliases-<gen>.parquet
STORE/graph/shard=NNNN/relations-<gen>.parquet
STORE/graph/shard=NNNN/CURRENT.json              {"generation": gen, "files": {...}}
```

A user's rows live in the shard of ``mnemoray.memory.store.layout.shard_of(app, user)``, the
memories' shard. A write puts a whole new generation of a shard's three files in
place (each written atomically), then flips ``CURRENT.json`` in one rename: a reader
sees the old generation or the new one, never a mix. The generation before is kept
for readers that read ``CURRENT.json`` just before the flip; older ones are removed.
``shard_tables`` / ``graph_from_tables`` are the row format on their own, for a
commit that lists the files in the memory store's manifest instead.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray.files import atomic_write, atomic_write_bytes, file_lock
from mnemoray.graph.graph import UserGraph
from mnemoray.graph.index import GraphIndex
from mnemoray.graph.model import Alias, Entity, Relation, Support
from mnemoray.memory.store.layout import new_name, shard_dir, shard_of

GRAPH_DIR = "graph"
CURRENT = "CURRENT.json"
TABLES = ("entities", "aliases", "relations")
_STRS = pa.list_(pa.string())
SUPPORTS = pa.list_(
    pa.struct(
        [
            ("session_id", pa.string()),
            ("event_ids", _STRS),
            ("memory_ids", _STRS),
            ("valid_from", pa.float64()),
            ("valid_to", pa.float64()),
            ("ended", pa.bool_()),
        ]
    )
)
_COMMON = [("app_name", pa.string()), ("user_id", pa.string())]
SCHEMAS = {
    "entities": pa.schema(
        [
            ("entity_id", pa.string()),
            *_COMMON,
            ("name", pa.string()),
            ("type", pa.string()),
            ("confidence", pa.float64()),
            ("first_seen", pa.float64()),
            ("last_seen", pa.float64()),
            ("mention_count", pa.int64()),
            ("speaker", pa.bool_()),
            ("supports", SUPPORTS),
            ("recorded_at", pa.float64()),
            ("version", pa.int64()),
            ("changed_by", pa.string()),
        ]
    ),
    "aliases": pa.schema(
        [
            ("entity_id", pa.string()),
            *_COMMON,
            ("alias", pa.string()),
            ("key", pa.string()),
            ("rule", pa.string()),
            ("confidence", pa.float64()),
            ("session_ids", _STRS),
            ("recorded_at", pa.float64()),
        ]
    ),
    "relations": pa.schema(
        [
            ("relation_id", pa.string()),
            *_COMMON,
            ("src", pa.string()),
            ("src_kind", pa.string()),
            ("type", pa.string()),
            ("dst", pa.string()),
            ("dst_kind", pa.string()),
            ("strength", pa.float64()),
            ("confidence", pa.float64()),
            ("valid_from", pa.float64()),
            ("valid_to", pa.float64()),
            ("ended_by", pa.string()),
            ("recorded_at", pa.float64()),
            ("supports", SUPPORTS),
            ("evidence", pa.string()),
            ("version", pa.int64()),
            ("changed_by", pa.string()),
        ]
    ),
}


def _row(record: Any, names: tuple[str, ...]) -> dict[str, Any]:
    # Not dataclasses.asdict: its deep copy of every field dominated a commit's time.
    row = {n: getattr(record, n) for n in names}
    if "supports" in row:
        row["supports"] = [{f: getattr(s, f) for f in _SUPPORT} for s in row["supports"]]
    return row


_SUPPORT = tuple(f.name for f in fields(Support))
_NAMES = {
    "entities": tuple(f.name for f in fields(Entity)),
    "aliases": tuple(f.name for f in fields(Alias)),
    "relations": tuple(f.name for f in fields(Relation)),
}


def shard_tables(graphs: Iterable[UserGraph]) -> dict[str, pa.Table]:
    """The three tables' rows for ``graphs`` (any users), in the stored schema."""
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    for g in graphs:
        rows["entities"].extend(_row(e, _NAMES["entities"]) for e in g.entities.values())
        rows["aliases"].extend(
            {**_row(a, _NAMES["aliases"]), "app_name": g.app_name, "user_id": g.user_id}
            for a in g.aliases.values()
        )
        rows["relations"].extend(_row(r, _NAMES["relations"]) for r in g.relations.values())
    return {t: pa.Table.from_pylist(rows[t], schema=SCHEMAS[t]) for t in TABLES}


def graph_from_tables(app_name: str, user_id: str, tables: dict[str, pa.Table]) -> UserGraph:
    """One user's graph read back from the three tables (rows of others are skipped)."""

    def mine(t: pa.Table) -> list[dict[str, Any]]:
        mask = pc.and_(pc.equal(t["app_name"], app_name), pc.equal(t["user_id"], user_id))
        return t.filter(mask).to_pylist()

    def supports(raw: list[dict[str, Any]] | None) -> tuple[Support, ...]:
        return tuple(
            Support(
                s["session_id"],
                tuple(s["event_ids"] or ()),
                tuple(s["memory_ids"] or ()),
                s["valid_from"],
                s["valid_to"],
                bool(s["ended"]),
            )
            for s in raw or ()
        )

    entities = [
        Entity(**{**r, "supports": supports(r["supports"])}) for r in mine(tables["entities"])
    ]
    aliases = [
        Alias(
            **{k: v for k, v in r.items() if k not in ("app_name", "user_id")}
            | {"session_ids": tuple(r["session_ids"] or ())}
        )
        for r in mine(tables["aliases"])
    ]
    relations = [
        Relation(**{**r, "supports": supports(r["supports"])}) for r in mine(tables["relations"])
    ]
    return UserGraph(app_name, user_id, entities, aliases, relations)


class GraphStore:
    """The graph tables of a store directory (``shards``: the memory store's count)."""

    def __init__(self, root: str | Path, shards: int = 1) -> None:
        self.root = Path(root)
        self.shards = shards
        shard_of("", "", shards)  # refuses shards < 1 with the store's message

    def _dir(self, shard: int) -> Path:
        return self.root / GRAPH_DIR / shard_dir(shard)

    def read_shard(
        self, shard: int, names: Iterable[str] = TABLES, columns: list[str] | None = None
    ) -> dict[str, pa.Table]:
        """The shard's committed tables (empty ones when nothing is written yet)."""
        current = self._dir(shard) / CURRENT
        if not current.exists():
            empty = {t: SCHEMAS[t].empty_table() for t in names}
            return {t: e.select(columns) if columns else e for t, e in empty.items()}
        files = json.loads(current.read_text(encoding="utf-8"))["files"]
        return {t: pq.read_table(self._dir(shard) / files[t], columns=columns) for t in names}

    def load(self, app_name: str, user_id: str) -> UserGraph:
        shard = shard_of(app_name, user_id, self.shards)
        return graph_from_tables(app_name, user_id, self.read_shard(shard))

    def save(self, *graphs: UserGraph) -> list[Path]:
        """Replace the stored rows of each graph's user; one new generation per shard
        touched. Returns the files written."""
        by_shard: dict[int, list[UserGraph]] = defaultdict(list)
        for g in graphs:
            by_shard[shard_of(g.app_name, g.user_id, self.shards)].append(g)
        written: list[Path] = []
        with file_lock(self.root / GRAPH_DIR / ".lock"):
            for shard, group in sorted(by_shard.items()):
                written.extend(self._write_shard(shard, group))
        return written

    def _write_shard(self, shard: int, graphs: list[UserGraph]) -> list[Path]:
        old = self.read_shard(shard)
        users = {(g.app_name, g.user_id) for g in graphs}
        fresh = shard_tables(graphs)
        tables = {}
        for t in TABLES:
            keys = zip(old[t]["app_name"].to_pylist(), old[t]["user_id"].to_pylist(), strict=True)
            others = old[t].filter(pa.array([k not in users for k in keys], pa.bool_()))
            tables[t] = pa.concat_tables([others.cast(SCHEMAS[t]), fresh[t]])
        return self.write_tables(shard, tables)

    def write_tables(self, shard: int, tables: dict[str, pa.Table]) -> list[Path]:
        """Publish ``tables`` (all three, in the stored schema) as the shard's next
        generation. The caller holds the lock (``save`` does)."""
        folder = self._dir(shard)
        generation = new_name("graph")
        files, paths = {}, []
        for t in TABLES:
            table = tables[t].cast(SCHEMAS[t])
            files[t] = f"{t}-{generation}.parquet"
            path = folder / files[t]
            atomic_write(path, functools.partial(pq.write_table, table))  # (table, tmp)
            paths.append(path)
        previous = self._current_generation(shard)
        atomic_write_bytes(
            folder / CURRENT,
            json.dumps({"generation": generation, "files": files, "previous": previous}).encode(),
        )
        keep = {generation, previous}
        for path in folder.glob("*-graph-*.parquet"):
            if path.stem.partition("-")[2] not in keep:
                path.unlink(missing_ok=True)
        return paths

    def _current_generation(self, shard: int) -> str | None:
        current = self._dir(shard) / CURRENT
        if not current.exists():
            return None
        return str(json.loads(current.read_text(encoding="utf-8"))["generation"])

    def forget_session(self, app_name: str, user_id: str, session_id: str) -> bool:
        """Forget one session of a user in the stored graph; True when it changed."""
        graph = self.load(app_name, user_id)
        changed = graph.forget_session(session_id)
        if changed:
            self.save(graph)
        return changed

    def load_index(self, app_name: str, user_id: str | None = None) -> GraphIndex:
        """The traversal index of one user, or (``user_id`` None) of every user of the
        app: read straight from the relations' columns, no records built."""
        shards = (
            range(self.shards) if user_id is None else [shard_of(app_name, user_id, self.shards)]
        )
        cols = [
            "relation_id",
            "app_name",
            "user_id",
            "src",
            "type",
            "dst",
            "valid_from",
            "valid_to",
        ]
        parts = []
        for shard in shards:
            t = self.read_shard(shard, ("relations",), cols)["relations"]
            mask = pc.equal(t["app_name"], app_name)
            if user_id is not None:
                mask = pc.and_(mask, pc.equal(t["user_id"], user_id))
            parts.append(t.filter(mask))
        t = pa.concat_tables(parts) if parts else SCHEMAS["relations"].empty_table()
        return index_from_relations(t)


def index_from_relations(t: pa.Table) -> GraphIndex:
    """The traversal index over a relations table (its columns, no records built)."""
    return GraphIndex.from_columns(
        t["src"].to_numpy(zero_copy_only=False),
        t["dst"].to_numpy(zero_copy_only=False),
        t["type"].to_numpy(zero_copy_only=False),
        t["valid_from"].to_numpy(zero_copy_only=False),
        t["valid_to"].to_numpy(zero_copy_only=False),
        t["relation_id"].to_pylist(),
    )
