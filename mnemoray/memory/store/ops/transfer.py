"""Export / import of a memory store as JSON lines (lossless, embeddings included).

Line 1 is a header (format, embedding model + dim, summarizer, shards, count);
then one line per live memory: all its fields, its entities and topics
(the per-memory graph information) and its embedding; then one line per row of the
entity graph (``{"type": "graph", "table": "entities"|"aliases"|"relations",
"row": {...}}``, the stored rows as they are: the graph is carried, not rebuilt).
Floats are written at float64 precision, so float32 embeddings read back
bit-identical.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mnemoray.errors import StoreError
from mnemoray.files import atomic_write
from mnemoray.memory.records.record import Memory, MemoryRecordError
from mnemoray.memory.store.graph.tables import TABLES as GRAPH_TABLES
from mnemoray.memory.store.snapshot import StoreSnapshot

EXPORT_FORMAT = "mnemoray.memories.v1"


def export_jsonl(snap: StoreSnapshot, path: str | Path) -> int:
    """Write the snapshot's live memories; returns how many.

    Lines are ordered by (app, user, created_at, memory_id), independent of
    how rows are split into segments, so equal stores export equal files.
    """
    m, now = snap.manifest, time.time()
    count = snap.count(now=now)
    header = {
        "type": "header",
        "format": EXPORT_FORMAT,
        "embedding_model": m.embedding_model,
        "dim": m.dim,
        "summarizer": m.summarizer,
        "shards": m.shards,
        "count": count,
    }

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(json.dumps(header, ensure_ascii=False) + "\n")
            for app, user in snap.tenants():
                for mem in snap.rows_for_user(app, user, now=now):
                    out.write(
                        json.dumps(
                            {"type": "memory", **mem.to_dict(with_embedding=True)},
                            ensure_ascii=False,
                        )
                        + "\n"
                    )
            graph = getattr(snap, "graph", None)  # None: a store without one (LanceDB)
            if graph is None:
                return
            for shard in range(m.shards):
                if not m.graph[shard]:
                    continue
                for table, rows in graph.shard_tables(shard).items():
                    for row in rows.to_pylist():
                        out.write(
                            json.dumps(
                                {"type": "graph", "table": table, "row": row}, ensure_ascii=False
                            )
                            + "\n"
                        )

    atomic_write(Path(path), write)
    return count


def read_export(path: str | Path, batch_size: int) -> tuple[dict[str, Any], Iterator[list[Memory]]]:
    """The header and an iterator of memory batches; errors name the line."""
    path = Path(path)
    with open(path, encoding="utf-8") as src:
        first = src.readline()
    try:
        header = json.loads(first or "null")
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}:1: invalid JSON ({exc.msg})") from exc
    if (
        not isinstance(header, dict)
        or header.get("type") != "header"
        or header.get("format") != EXPORT_FORMAT
    ):
        raise StoreError(f"{path}:1: not a {EXPORT_FORMAT} header line")

    def batches() -> Iterator[list[Memory]]:
        batch: list[Memory] = []
        with open(path, encoding="utf-8") as src:
            src.readline()
            for lineno, line in enumerate(src, start=2):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise StoreError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
                kind = raw.pop("type", None) if isinstance(raw, dict) else None
                if kind == "graph":
                    continue  # read by read_graph_rows
                if kind != "memory":
                    raise StoreError(f"{path}:{lineno}: expected a memory or graph line")
                if header.get("embedding_model") is None:
                    raise StoreError(f"{path}:1: header names no embedding model")
                try:
                    batch.append(Memory.from_dict(raw))
                except MemoryRecordError as exc:
                    raise StoreError(f"{path}:{lineno}: {exc}") from exc
                if len(batch) >= batch_size:
                    yield batch
                    batch = []
        if batch:
            yield batch

    return header, batches()


def read_graph_rows(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The export's graph rows per table (none in an export written before the graph)."""
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in GRAPH_TABLES}
    with open(path, encoding="utf-8") as src:
        src.readline()
        for lineno, line in enumerate(src, start=2):
            if '"graph"' not in line:  # a memory line (cheap test before parsing)
                continue
            raw = json.loads(line)
            if raw.get("type") != "graph":
                continue
            if raw.get("table") not in out or not isinstance(raw.get("row"), dict):
                raise StoreError(
                    f"{path}:{lineno}: a graph line names table "
                    f"{raw.get('table')!r}; expected one of "
                    f"{', '.join(GRAPH_TABLES)} with a row object"
                )
            out[raw["table"]].append(raw["row"])
    return out
