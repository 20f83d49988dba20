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
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from mnemoray import limits
from mnemoray.errors import InvalidInput, StoreError
from mnemoray.files import atomic_write
from mnemoray.memory.records.agent_names import check_agent_name
from mnemoray.memory.records.record import TEXT_LISTS, Memory, MemoryRecordError
from mnemoray.memory.store.graph.tables import SCHEMAS as GRAPH_SCHEMAS
from mnemoray.memory.store.graph.tables import TABLES as GRAPH_TABLES
from mnemoray.memory.store.snapshot import StoreSnapshot

EXPORT_FORMAT = "mnemoray.memories.v1"
# NUL and the separator of the graph and shard keys: in no string of a graph row.
SEPARATORS = re.compile(r"[\x00\x1f]")


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


def _line_error(path: Path, lineno: int, message: str) -> StoreError:
    return StoreError(f"{path}:{lineno}: {message}")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of the file; a line over ``MAX_ROW_BYTES`` is refused before
    it is read whole (an export line is one memory or one graph row)."""
    limit = limits.MAX_ROW_BYTES
    with open(path, encoding="utf-8") as src:
        for lineno, line in enumerate(iter(lambda: src.readline(limit + 1), ""), start=1):
            # Characters are at most bytes: a line of more characters is over in bytes too.
            size = limit + 1 if len(line) > limit else len(line.encode("utf-8", "surrogatepass"))
            if size > limit:
                raise _line_error(
                    path,
                    lineno,
                    f"the line is over {limit:,} bytes (mnemoray.limits.MAX_ROW_BYTES)",
                )
            yield lineno, line


def _parse(path: Path, lineno: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise _line_error(path, lineno, f"invalid JSON ({exc.msg})") from exc
    except RecursionError:  # the decoder's own depth guard
        raise _line_error(path, lineno, "JSON nested too deeply") from None


def _check_header(path: Path, header: Any) -> dict[str, Any]:
    if (
        not isinstance(header, dict)
        or header.get("type") != "header"
        or header.get("format") != EXPORT_FORMAT
    ):
        raise _line_error(path, 1, f"not a {EXPORT_FORMAT} header line")
    model, dim = header.get("embedding_model"), header.get("dim")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise _line_error(path, 1, "embedding_model: expected a model id or null")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 0):
        raise _line_error(path, 1, f"dim: expected a dimension (an integer >= 0), got {dim!r}")
    if model is not None and dim is None:
        raise _line_error(path, 1, f"the header names model {model!r} but no dim")
    shards = header.get("shards")
    if shards is not None and (
        isinstance(shards, bool) or not isinstance(shards, int) or shards < 1
    ):
        raise _line_error(path, 1, f"shards: expected an integer >= 1, got {shards!r}")
    summarizer = header.get("summarizer")
    if summarizer is not None and not isinstance(summarizer, str):
        raise _line_error(path, 1, "summarizer: expected a string or null")
    return header


def _check_id(value: Any, field: str) -> None:
    """The HTTP API's id rule (``mnemoray.schemas.common.Id``): 1 to MAX_ID_CHARS
    characters, no control characters (``\\x1f`` separates the graph and shard keys)."""
    from mnemoray.schemas.common import ID_PATTERN, MAX_ID_CHARS

    if not isinstance(value, str):
        raise MemoryRecordError(f"expected an id string, got {type(value).__name__}", field=field)
    if not value or len(value) > MAX_ID_CHARS or not re.match(ID_PATTERN, value):
        raise MemoryRecordError(
            f"{value[:40]!r} is not an id (1 to {MAX_ID_CHARS} characters, no control characters)",
            field=field,
        )


def _check_text(value: Any, what: str, field: str, limit: int) -> None:
    if isinstance(value, str) and len(value) > limit:
        raise MemoryRecordError(
            f"{what} is {len(value):,} characters (limit {limit:,})", field=field
        )


def _check_list(raw: dict[str, Any], name: str, items: int | None, chars: int | None) -> list[Any]:
    value = raw.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MemoryRecordError("expected a list", field=name)
    if items is not None and len(value) > items:
        raise MemoryRecordError(f"{len(value):,} items (limit {items:,})", field=name)
    for i, item in enumerate(value):
        if chars is not None:
            if not isinstance(item, str):
                raise MemoryRecordError(
                    f"expected a string, got {type(item).__name__}", field=f"{name}[{i}]"
                )
            _check_text(item, "the item", f"{name}[{i}]", chars)
    return value


def check_memory_row(raw: dict[str, Any], dim: int | None) -> None:
    """One exported memory against the limits of an online write (``MemoryIn`` of
    ``mnemoray.schemas.memories``, ``mnemoray.limits``); the record's own checks
    (``Memory``) follow when it is built. :class:`MemoryRecordError` naming the field."""
    from mnemoray.schemas.common import MAX_LIST_ITEMS, MAX_SHORT_CHARS

    text_limit = limits.MAX_MEMORY_TEXT_CHARS
    for name in ("app_name", "user_id", "session_id", "memory_id"):
        _check_id(raw.get(name), name)
    check_agent_name(raw.get("agent_name") or "", MemoryRecordError)
    _check_text(raw.get("text"), "memory text", "text", text_limit)
    _check_text(raw.get("key_text"), "memory key text", "key_text", text_limit)
    for name in TEXT_LISTS:
        _check_list(raw, name, MAX_LIST_ITEMS, MAX_SHORT_CHARS)
    # A record's sources are events of one session, or the memories consolidated.
    for i, event_id in enumerate(
        _check_list(raw, "source_event_ids", limits.MAX_SESSION_EVENTS, None)
    ):
        _check_id(event_id, f"source_event_ids[{i}]")
    for i, version in enumerate(_check_list(raw, "previous_versions", None, None)):
        if isinstance(version, dict):
            _check_id(version.get("memory_id"), f"previous_versions[{i}].memory_id")
            _check_text(
                version.get("text"), "an earlier text", f"previous_versions[{i}].text", text_limit
            )
    embedding = raw.get("embedding")
    if embedding is not None:
        if not isinstance(embedding, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in embedding
        ):
            raise MemoryRecordError("expected a list of finite numbers", field="embedding")
        if len(embedding) != (dim or 0):
            raise MemoryRecordError(
                f"{len(embedding)} numbers, but the header says dim {dim}", field="embedding"
            )


def _check_strings(value: Any, field: str) -> None:
    """No NUL or ``\\x1f`` (the keys' separator) in any string of a graph row."""
    if isinstance(value, str):
        if SEPARATORS.search(value):
            raise StoreError(f"{value[:40]!r} holds NUL or \\x1f", field=field)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_strings(item, f"{field}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(item, f"{field}.{key}")


def check_graph_row(raw: dict[str, Any]) -> None:
    """One exported graph row: a known table, exactly its stored columns in their types
    (``graph.tables.SCHEMAS``), ids by the id rule. :class:`InvalidInput` naming the field."""
    table, row = raw.get("table"), raw.get("row")
    if (
        table not in GRAPH_TABLES
        or not isinstance(row, dict)
        or set(raw) != {"type", "table", "row"}
    ):
        raise StoreError(
            f"a graph line names table {table!r}; expected one of "
            f"{', '.join(GRAPH_TABLES)} with a row object"
        )
    schema = GRAPH_SCHEMAS[table]
    unknown, missing = set(row) - set(schema.names), set(schema.names) - set(row)
    if unknown or missing:
        name = sorted(unknown or missing)[0]
        raise StoreError(
            f"{'unknown' if unknown else 'missing'} {table} column", field=f"row.{name}"
        )
    for name in ("app_name", "user_id", "entity_id", "relation_id"):
        if name in row:
            try:
                _check_id(row[name], f"row.{name}")
            except MemoryRecordError as exc:
                raise StoreError(exc.reason, field=exc.field) from None
    for name, value in row.items():
        _check_strings(value, f"row.{name}")
    try:
        pa.Table.from_pylist([row], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        raise StoreError(f"not a {table} row of the stored types ({exc})", field="row") from None


def _memory(path: Path, lineno: int, raw: dict[str, Any], header: dict[str, Any]) -> Memory:
    if header.get("embedding_model") is None:
        raise _line_error(path, 1, "header names no embedding model")
    try:
        check_memory_row(raw, header.get("dim"))
        return Memory.from_dict(raw)
    except MemoryRecordError as exc:
        raise _line_error(path, lineno, str(exc)) from exc


def _rows(path: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, "memory" | "graph", the object) of every line after the header."""
    for lineno, line in _lines(path):
        if lineno == 1 or not line.strip():
            continue
        raw = _parse(path, lineno, line)
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind not in ("memory", "graph"):
            raise _line_error(path, lineno, "expected a memory or graph line")
        yield lineno, kind, raw


def _read_header(path: Path) -> dict[str, Any]:
    for _, line in _lines(path):
        return _check_header(path, _parse(path, 1, line or "null"))
    return _check_header(path, None)


def check_export(path: str | Path) -> dict[str, Any]:
    """Read the whole export and check every line against the limits of an online write
    (header, memories, graph rows) before anything is stored; returns the header.
    :class:`StoreError` naming the line and what is wrong. Both stores' imports call it."""
    path = Path(path)
    header = _read_header(path)
    # The whole import is one commit: no batch is checked against another by the store,
    # so one id holding two contents is refused here, across the file.
    ids: dict[str, str] = {}
    for lineno, kind, raw in _rows(path):
        if kind == "memory":
            raw.pop("type")
            mem = _memory(path, lineno, raw, header)
            if ids.setdefault(mem.memory_id, mem.content_hash) != mem.content_hash:
                what = f"memory_id {mem.memory_id!r} holds two different contents"
                raise _line_error(path, lineno, what)
        else:
            try:
                check_graph_row(raw)
            except InvalidInput as exc:
                raise _line_error(path, lineno, str(exc)) from exc
    return header


def read_export(path: str | Path, batch_size: int) -> tuple[dict[str, Any], Iterator[list[Memory]]]:
    """The header and an iterator of memory batches; errors name the line. Rows repeated
    in the file (a content hash seen in an earlier batch) are left out."""
    path = Path(path)
    header = _read_header(path)

    def batches() -> Iterator[list[Memory]]:
        batch: list[Memory] = []
        seen: set[str] = set()
        for lineno, kind, raw in _rows(path):
            if kind == "graph":
                continue  # read by read_graph_rows
            raw.pop("type")
            mem = _memory(path, lineno, raw, header)
            if mem.content_hash in seen:
                continue
            seen.add(mem.content_hash)
            batch.append(mem)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    return header, batches()


def read_graph_rows(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The export's graph rows per table (none in an export written before the graph)."""
    path = Path(path)
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in GRAPH_TABLES}
    for lineno, line in _lines(path):
        if lineno == 1 or '"graph"' not in line:  # a memory line (cheap test before parsing)
            continue
        raw = _parse(path, lineno, line)
        if not isinstance(raw, dict) or raw.get("type") != "graph":
            continue
        try:
            check_graph_row(raw)
        except InvalidInput as exc:
            raise _line_error(path, lineno, str(exc)) from exc
        out[raw["table"]].append(raw["row"])
    return out
