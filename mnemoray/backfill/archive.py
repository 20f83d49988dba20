"""The session archive format (docs/architecture.md, "Input: the archive").

An archive is one file or a directory tree of ``.parquet``, ``.jsonl`` and
``.json`` files holding one session per row/line: the Session fields plus
``events``; timestamps as ISO-8601 or epoch seconds. Google ADK Session JSON
is recognised and mapped (see :mod:`mnemoray.adk_import`).

Reading never stops at a bad row: :func:`iter_archive` yields every row, good
or bad, with its location, so a job can quarantine the bad ones with a reason.
:func:`session_from_record` is the one parse function, shared with the Ray
Data pipeline that reads the same files.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mnemoray import limits
from mnemoray.adk.importer import session_from_adk
from mnemoray.adk.mapping import looks_like_adk
from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session, SessionError, check_session_size
from mnemoray.sessions.state import persisted_event, without_temp

logger = logging.getLogger(__name__)
T = TypeVar("T")

ArchiveFormat = Literal["parquet", "jsonl"]
SUFFIXES = (".parquet", ".jsonl", ".json")
# Rows per Parquet batch: sessions can be large, so keep batches small.
BATCH_ROWS = 256
# What the quarantine keeps of a row too large to parse: its head, for a human to find it.
OVERSIZE_HEAD_CHARS = 1_000

# Event payload fields are JSON strings in Parquet: their shape is free-form.
EVENT_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("invocation_id", pa.string()),
        ("author", pa.string()),
        ("role", pa.string()),
        ("type", pa.string()),
        ("timestamp", pa.float64()),
        ("text", pa.string()),
        ("data", pa.string()),
        ("state_delta", pa.string()),
        ("artifact_delta", pa.string()),
        ("partial", pa.bool_()),
    ]
)
SCHEMA = pa.schema(
    [
        ("app_name", pa.string()),
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("state", pa.string()),
        ("created_at", pa.float64()),
        ("updated_at", pa.float64()),
        ("ended_at", pa.float64()),
        ("events", pa.list_(EVENT_TYPE)),
    ]
)
ID_COLUMNS = ("app_name", "user_id", "session_id", "id", "appName", "userId")
# Top-level fields the parser reads, in the mnemoray and the ADK spellings.
SESSION_COLUMNS = frozenset(
    {*SCHEMA.names, "id", "appName", "userId", "lastUpdateTime", "last_update_time"}
)


class ArchiveError(InvalidInput):
    """A bad archive row or file; ``location`` (the field) says where, ``reason`` what."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(reason, field=location)
        self.location = location


@dataclass(frozen=True)
class ArchiveRow:
    """One row of an archive: a parsed session, or the error that stopped it.

    ``location`` is ``file.jsonl:17`` (1-based line), ``part-0.parquet:row 3``
    (0-based row index) or ``file.json[2]``, relative to the archive root.
    ``raw`` is the decoded record, or the text of a line that is not JSON.
    """

    location: str
    raw: Any
    session: Session | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.session is not None


def session_from_record(raw: dict[str, Any]) -> Session:
    """Parse one archive record (mnemoray or ADK form) into a Session.

    Raises :class:`SessionError` whose message names the field, e.g.
    ``events[2].role: 'bot' is not one of user, model, tool, system``.
    """
    if not isinstance(raw, dict):
        raise SessionError(f"expected a JSON object, got {type(raw).__name__}")
    if looks_like_adk(raw):
        session = session_from_adk(raw)
        check_session_size(session.events)  # Session.from_dict checks its own
        return session
    return Session.from_dict(raw)


# -- reading ---------------------------------------------------------------
def parse_row(location: str, raw: Any) -> ArchiveRow:
    """``raw`` parsed by :func:`session_from_record`; a bad row carries its error."""
    try:
        return ArchiveRow(location, raw, session=session_from_record(raw))
    except (ValueError, TypeError) as exc:  # a bad row is reported, never raised
        return ArchiveRow(location, raw, error=str(exc))
    except RecursionError:  # hostile nesting: a bad row like any other
        return ArchiveRow(location, raw, error="nested too deeply")


def oversize_row(location: str, nbytes: int, head: str) -> ArchiveRow:
    """A row over ``limits.MAX_ROW_BYTES``, refused before it is parsed: parsing,
    distilling and embedding it would cost many times its size in memory."""
    try:
        limits.check_size(nbytes, "MAX_ROW_BYTES", "the row", None)
    except InvalidInput as exc:
        raw = {"oversize_row_bytes": nbytes, "head": head[:OVERSIZE_HEAD_CHARS]}
        return ArchiveRow(location, raw, error=str(exc))
    raise AssertionError("oversize_row called for a row within the limit")


def archive_files(path: str | Path) -> list[tuple[Path, str]]:
    """The archive's data files, in reading order, each with its name in locations.

    Raises :class:`ArchiveError` for a missing path or an unsupported single file.
    """
    root = Path(path)
    if not root.exists():
        raise ArchiveError(str(root), "no such file or directory")
    return [
        (file, file.name if file == root else file.relative_to(root).as_posix())
        for file in _archive_files(root)
    ]


def _archive_files(root: Path) -> list[Path]:
    if root.is_file():
        if root.suffix not in SUFFIXES:
            raise ArchiveError(root.name, f"unsupported file type (expected {', '.join(SUFFIXES)})")
        return [root]
    # Hidden and "_" files are writers' temp files and markers (_SUCCESS), not data.
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix in SUFFIXES
        and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    )


def _iter_lines(lines: Iterable[bytes], name: str) -> Iterator[ArchiveRow]:
    for lineno, line in enumerate(lines, start=1):
        location = f"{name}:{lineno}"
        if len(line) > limits.MAX_ROW_BYTES:
            yield oversize_row(
                location,
                len(line),
                line[: OVERSIZE_HEAD_CHARS * 4].decode("utf-8", errors="replace"),
            )
            continue
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield ArchiveRow(
                location,
                line.decode("utf-8", errors="replace"),
                error=f"not UTF-8 ({exc.reason} at byte {exc.start})",
            )
            continue
        if not text:
            continue  # blank lines separate nothing and hold no row
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            yield ArchiveRow(location, text, error=f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        except RecursionError:
            yield ArchiveRow(location, text[:OVERSIZE_HEAD_CHARS], error="nested too deeply")
            continue
        yield parse_row(location, raw)


def _iter_jsonl(path: Path, name: str) -> Iterator[ArchiveRow]:
    with path.open("rb") as f:  # bytes: one bad encoding spoils a line, not the file
        yield from _iter_lines(f, name)


def _iter_json(path: Path, name: str) -> Iterator[ArchiveRow]:
    data = path.read_bytes()
    try:
        raw = json.loads(data)
    except UnicodeDecodeError as exc:
        yield ArchiveRow(name, None, error=f"not UTF-8 ({exc.reason} at byte {exc.start})")
        return
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # JSON Lines saved under a .json name
            yield from _iter_lines(data.splitlines(), name)
        else:
            yield ArchiveRow(
                name,
                data.decode("utf-8", errors="replace"),
                error=f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            )
        return
    if isinstance(raw, list):  # an array of sessions
        for i, item in enumerate(raw):
            yield parse_row(f"{name}[{i}]", item)
    else:
        yield parse_row(name, raw)


def _iter_parquet(path: Path, name: str) -> Iterator[ArchiveRow]:
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        yield ArchiveRow(name, None, error=f"unreadable Parquet file: {exc}")
        return
    # Projection pushdown: only the columns the parser reads are decoded (and
    # hashed into the ledger key), so an unrelated wide column costs nothing.
    columns = [n for n in parquet.schema_arrow.names if n in SESSION_COLUMNS]
    with parquet:
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns)
        index = 0
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as exc:
                yield ArchiveRow(
                    f"{name}:row {index}",
                    None,
                    error=f"unreadable Parquet data from this row on: {exc}",
                )
                return
            sizes = row_bytes(batch)
            if int(sizes.max(initial=0)) <= limits.MAX_ROW_BYTES:
                for raw in batch.to_pylist():
                    yield parse_row(f"{name}:row {index}", raw)
                    index += 1
                continue
            for i, size in enumerate(sizes.tolist()):  # decode each row only if it fits
                location = f"{name}:row {index}"
                if size > limits.MAX_ROW_BYTES:  # only its ids are decoded, for the reason
                    ids = batch.select([c for c in batch.schema.names if c in ID_COLUMNS])
                    head = ids.slice(i, 1).to_pylist()[0] if ids.num_columns else {}
                    yield oversize_row(
                        location, size, json.dumps(head, ensure_ascii=False, default=str)
                    )
                else:
                    yield parse_row(location, batch.slice(i, 1).to_pylist()[0])
                index += 1


def row_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """Bytes of variable-size data (strings, binaries) in each row, nested lists and
    structs included: what decoding the row into Python would have to hold."""
    total = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        total += _array_bytes(column)
    return total


def _array_bytes(array: pa.Array) -> np.ndarray:
    kind = array.type
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        return (
            pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        values = array.flatten()
        if not len(values):
            return np.zeros(len(array), dtype=np.int64)
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        return np.bincount(parents, weights=_array_bytes(values), minlength=len(array)).astype(
            np.int64
        )
    if pa.types.is_struct(kind):
        out = np.zeros(len(array), dtype=np.int64)
        for child in array.flatten():
            out += _array_bytes(child)
        return out
    return np.zeros(len(array), dtype=np.int64)  # fixed width: small by construction


_READERS = {".parquet": _iter_parquet, ".jsonl": _iter_jsonl, ".json": _iter_json}


def iter_archive(path: str | Path) -> Iterator[ArchiveRow]:
    """Every row of the archive at ``path`` (a file or a directory), in file order.

    Bad rows come back with ``error`` set; only a missing path or an
    unsupported single file raises :class:`ArchiveError`.
    """
    for file, name in archive_files(path):
        yield from iter_archive_file(file, name)


def iter_archive_file(file: str | Path, name: str | None = None) -> Iterator[ArchiveRow]:
    """Every row of one archive file; ``name`` prefixes locations (default: file name)."""
    file = Path(file)
    reader = _READERS.get(file.suffix)
    if reader is None:
        raise ArchiveError(file.name, f"unsupported file type (expected {', '.join(SUFFIXES)})")
    yield from reader(file, file.name if name is None else name)


# Text files up to this size are counted line by line; bigger ones are estimated
# from their first EXACT_COUNT_BYTES (a progress ETA needs no more).
EXACT_COUNT_BYTES = 8 << 20


def _text_rows(path: Path) -> int:
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(EXACT_COUNT_BYTES)
    if head.lstrip()[:1] == b"[":  # a JSON array of sessions
        if size > EXACT_COUNT_BYTES:
            return max(1, head.count(b'"events"'))
        try:
            raw = json.loads(head)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return 1
        return len(raw) if isinstance(raw, list) else 1
    lines = sum(1 for line in head.splitlines() if line.strip())
    if size <= EXACT_COUNT_BYTES or not head:
        return lines
    return round(lines * size / len(head))


def estimate_rows(path: str | Path) -> int:
    """Rows in the archive without reading it all: exact for Parquet (footer) and
    for text files up to 8 MiB, extrapolated from their head for bigger ones."""
    total = 0
    for file, _ in archive_files(path):
        try:
            total += (
                pq.ParquetFile(file).metadata.num_rows
                if file.suffix == ".parquet"
                else _text_rows(file)
            )
        except (pa.ArrowException, OSError):
            total += 1  # unreadable: it yields one quarantined row
    return total


def read_archive(path: str | Path, strict: bool = True) -> list[Session]:
    """All sessions in the archive.

    ``strict``: raise :class:`ArchiveError` (location and field) on the first
    bad row. Otherwise bad rows are logged as warnings and left out; use
    :func:`iter_archive` to collect them.
    """
    sessions: list[Session] = []
    for row in iter_archive(path):
        if row.session is not None:
            sessions.append(row.session)
        elif strict:
            raise ArchiveError(row.location, row.error or "unreadable row")
        else:
            logger.warning("archive row skipped: %s: %s", row.location, row.error)
    return sessions


# -- writing -----------------------------------------------------------------
def _json(value: Any, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"not JSON-serializable ({exc})", field=field) from exc


def _event_record(i: int, event: Event) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "invocation_id": str(event.invocation_id),
        "author": event.author,
        "role": event.role,
        "type": event.type,
        "timestamp": event.timestamp,
        "text": event.text,
        "data": _json(event.data, f"events[{i}].data"),
        # temp: keys never leave the invocation (a session built in memory may hold them).
        "state_delta": _json(without_temp(event.state_delta), f"events[{i}].state_delta"),
        "artifact_delta": _json(event.artifact_delta, f"events[{i}].artifact_delta"),
        "partial": event.partial,
    }


def _parquet_record(session: Session) -> dict[str, Any]:
    return {
        "app_name": session.app_name,
        "user_id": session.user_id,
        "session_id": session.session_id,
        "state": _json(without_temp(session.state), "state"),
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "ended_at": session.ended_at,
        "events": [_event_record(i, e) for i, e in enumerate(session.events)],
    }


def _jsonl_line(session: Session) -> str:
    record = session.to_dict()
    record["state"] = without_temp(session.state)  # temp: keys never leave the invocation
    record["events"] = [persisted_event(e).to_dict() for e in session.events]
    try:
        return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
    except (TypeError, ValueError):
        _parquet_record(session)  # encodes field by field: raises naming the culprit
        raise


def _records(sessions: Iterable[Session], encode: Callable[[Session], T]) -> Iterator[T]:
    for i, session in enumerate(sessions):
        try:
            yield encode(session)
        except (TypeError, ValueError) as exc:  # SessionError is a ValueError
            raise ArchiveError(f"sessions[{i}] ({session.session_id})", str(exc)) from exc


def _write_parquet(sessions: Iterable[Session], target: Path) -> None:
    with pq.ParquetWriter(target, SCHEMA) as writer:
        batch: list[dict[str, Any]] = []
        for record in _records(sessions, _parquet_record):
            batch.append(record)
            if len(batch) >= BATCH_ROWS:
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=SCHEMA))
                batch = []
        if batch:
            writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=SCHEMA))


def _write_jsonl(sessions: Iterable[Session], target: Path) -> None:
    with target.open("w", encoding="utf-8") as f:
        for line in _records(sessions, _jsonl_line):
            f.write(line)


def _format_for(path: Path, fmt: ArchiveFormat | None) -> ArchiveFormat:
    # The reader picks the format by suffix, so the suffix decides; fmt may only agree.
    by_suffix: dict[str, ArchiveFormat] = {
        ".parquet": "parquet",
        ".jsonl": "jsonl",
        ".json": "jsonl",
    }
    inferred = by_suffix.get(path.suffix)
    if inferred is None:
        raise InvalidInput(f"an archive file ends in {', '.join(SUFFIXES)}", field=path.name)
    if fmt is not None and fmt != inferred:
        raise InvalidInput(f"{fmt!r} does not match the file suffix {path.suffix!r}", field="fmt")
    return inferred


def write_archive(
    sessions: Iterable[Session], path: str | Path, fmt: ArchiveFormat | None = None
) -> Path:
    """Write ``sessions`` to one archive file and return its path.

    The format follows the suffix (``.parquet``; ``.jsonl`` or ``.json`` for
    JSON Lines); ``fmt``, if given, must agree with it. The
    file appears complete or not at all: it is written to a hidden temp file
    beside the target, synced, then renamed over it.
    """
    target = Path(path)
    chosen = _format_for(target, fmt)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        (_write_parquet if chosen == "parquet" else _write_jsonl)(sessions, tmp)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
