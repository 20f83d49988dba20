"""The tables of a LanceDB store, its head file and the SQL the store speaks.

``DIR/`` holds three LanceDB tables beside each other and one small file:

- ``memories``: one row per memory, the Parquet segment schema
  (:func:`~mnemoray.memory.store.rows.memory_schema`, the embedding a fixed-size list of
  float32) plus ``committed_in``, the head version whose commit added the row;
- ``ledger``: session hashes already ingested (``session_hash``, ``run_id``, ``added_at``);
- ``forgets``: one row per forget (the :class:`~mnemoray.memory.store.tombstones.Tombstone`
  fields: scope, ids, reason, actor): what was deleted, by whom and why;
- ``lancedb.json``: the head, rewritten by an atomic rename after each commit: the head
  version, the embedding model and dim, the summarizer, and the version of the
  ``memories`` and ``forgets`` tables that readers pin to.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from mnemoray.errors import StoreCorrupt
from mnemoray.files import atomic_write_bytes
from mnemoray.memory.store.manifest import Manifest
from mnemoray.memory.store.rows import EMBEDDING, memory_schema
from mnemoray.memory.store.tombstones import Tombstone

if TYPE_CHECKING:
    from mnemoray.memory.records.filters import RecallFilters

HEAD = "lancedb.json"  # the same name as mnemoray.memory.store.protocol.LANCE_HEAD
FORMAT = "mnemoray.lance_store"
MEMORIES, LEDGER, FORGETS = "memories", "ledger", "forgets"
COMMITTED_IN = "committed_in"

LEDGER_SCHEMA = pa.schema(
    [
        pa.field("session_hash", pa.string(), nullable=False),
        pa.field("run_id", pa.string()),
        pa.field("added_at", pa.float64()),
    ]
)
FORGETS_SCHEMA = pa.schema(
    [
        pa.field("scope", pa.string(), nullable=False),
        pa.field("version", pa.int64()),
        pa.field("at", pa.float64()),
    ]
    + [
        pa.field(n, pa.string())
        for n in ("memory_id", "app_name", "user_id", "session_id", "reason", "actor")
    ]
)


def memories_schema(dim: int) -> pa.Schema:
    return memory_schema(dim).append(pa.field(COMMITTED_IN, pa.int64(), nullable=False))


@dataclass
class LanceManifest(Manifest):
    """A LanceDB store's head as a manifest: one shard, no segment or tombstone files."""

    row_count: int = 0

    @property
    def rows(self) -> int:
        """Stored rows (a Parquet manifest counts its segments' rows, forgotten ones too)."""
        return self.row_count


@dataclass(frozen=True)
class Head:
    """The committed state readers see (``lancedb.json``)."""

    version: int = 0
    embedding_model: str | None = None
    dim: int | None = None
    summarizer: str | None = None
    memories_version: int | None = None  # None: no memories table yet
    forgets_version: int | None = None
    ledger_sessions: int = 0
    forget_count: int = 0
    rows: int = 0  # stored memory rows (expired ones too, until forgotten)
    updated_at: float = 0.0

    def manifest(self) -> Manifest:
        """The head in the form every reader of a store head takes (one shard, no files)."""
        return LanceManifest(
            shards=1,
            version=self.version,
            embedding_model=self.embedding_model,
            dim=self.dim,
            summarizer=self.summarizer,
            ledger_sessions=self.ledger_sessions,
            tombstone_count=self.forget_count,
            updated_at=self.updated_at,
            row_count=self.rows,
        )

    def bumped(self, **changes: Any) -> Head:
        return replace(self, version=self.version + 1, updated_at=time.time(), **changes)


def read_head(root: Path) -> Head:
    path = root / HEAD
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return Head()
    except (OSError, ValueError) as exc:
        raise StoreCorrupt(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict) or raw.pop("format", None) != FORMAT:
        raise StoreCorrupt(f"{path} is not a {FORMAT} head")
    try:
        return Head(**raw)
    except TypeError as exc:
        raise StoreCorrupt(f"{path}: {exc}") from exc


def write_head(root: Path, head: Head) -> None:
    atomic_write_bytes(
        root / HEAD, json.dumps({"format": FORMAT, **asdict(head)}, indent=1).encode()
    )


# -- SQL (DataFusion) ---------------------------------------------------------------
def sql_str(value: str) -> str:
    """A SQL string literal: quotes doubled, nothing else can break out of it."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})" if values else "FALSE"


def owner_where(app: str, user: str | None = None) -> str:
    where = f"app_name = {sql_str(app)}"
    return where if user is None else f"{where} AND user_id = {sql_str(user)}"


def agent_where(agent_name: str | None) -> str:
    """The rows an app-wide search for ``agent_name`` may see (scopes.agent_rows)."""
    shared = "(agent_name IS NULL OR agent_name = '')"
    return shared if not agent_name else f"({shared} OR agent_name = {sql_str(agent_name)})"


def live_where(now: float) -> str:
    """Rows not expired at ``now`` (TTL filtered on read; null: never expires)."""
    return f"(expires_at IS NULL OR expires_at > {float(now)!r})"


def filters_where(flt: RecallFilters) -> list[str]:
    """``RecallFilters`` as where-clauses, the same rule as ``RecallFilters.mask_table``:
    a missing event-time end uses the other, both missing ``created_at``."""
    out = []
    if flt.session_id is not None:
        out.append(f"session_id = {sql_str(flt.session_id)}")
    if flt.kinds is not None:
        out.append(sql_in("kind", list(flt.kinds)))
    if flt.after is not None:
        out.append(
            f"coalesce(event_time_end, event_time_start, created_at) >= {float(flt.after)!r}"
        )
    if flt.before is not None:
        out.append(
            f"coalesce(event_time_start, event_time_end, created_at) <= {float(flt.before)!r}"
        )
    return out


def both(*clauses: str | None) -> str | None:
    picked = [c for c in clauses if c]
    return " AND ".join(f"({c})" for c in picked) if picked else None


# -- rows -----------------------------------------------------------------------------
def split_vectors(table: pa.Table, dim: int) -> tuple[pa.Table, np.ndarray | None]:
    """(rows without the embedding column, their vectors as a (n, dim) float32 array)."""
    if not dim or EMBEDDING not in table.column_names:
        return table, None
    flat = table[EMBEDDING].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    vectors = np.ascontiguousarray(np.asarray(flat, dtype=np.float32).reshape(-1, dim))
    return table.drop_columns([EMBEDDING]), vectors


def tombstone_of(row: dict[str, Any]) -> Tombstone:
    fields: dict[str, Any] = {k: ("" if v is None else v) for k, v in row.items()}
    return Tombstone(**fields)


__all__ = [
    "COMMITTED_IN",
    "FORGETS",
    "FORGETS_SCHEMA",
    "HEAD",
    "LEDGER",
    "LEDGER_SCHEMA",
    "MEMORIES",
    "Head",
    "agent_where",
    "both",
    "filters_where",
    "live_where",
    "memories_schema",
    "owner_where",
    "read_head",
    "sql_in",
    "sql_str",
    "split_vectors",
    "tombstone_of",
    "write_head",
]
