"""What a memory write is, for every store backend (Parquet + FAISS, LanceDB): its
result, the ledger key of a session, and the checks and in-batch dedupe of the records
it takes, and the targets of a forget."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import numpy as np

from mnemoray.embedders.base import KEYWORD_ONLY_MODEL
from mnemoray.errors import StoreError
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.index import NORM_TOLERANCE
from mnemoray.memory.store.manifest import Manifest
from mnemoray.sessions.session import Session

IMPORT_BATCH = 50_000
OwnedId = tuple[str, str, str]  # (app_name, user_id, memory_id): a memory id is unique per owner
SessionKey = tuple[str, str, str]  # (app_name, user_id, session_id)


@dataclass(frozen=True)
class WriteResult:
    version: int  # manifest version after the write
    written: int  # memory rows committed
    skipped: int  # memories that were already in the store
    segments: tuple[str, ...]  # committed segment names
    ledger_added: int  # session hashes newly recorded as processed


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"value of type {type(value).__name__} is not JSON content")


def session_content_hash(session: Session | Mapping[str, Any]) -> str:
    """Stable identity of a session's content, the ledger key.

    In a pipeline, hash the raw archive row: parsing may fill defaults (event
    ids, timestamps) that differ from run to run.
    """
    raw = session.to_dict() if isinstance(session, Session) else session
    if not isinstance(raw, Mapping):
        raise StoreError(
            f"expected a Session or a mapping, got {type(raw).__name__}", field="session"
        )
    try:
        text = json.dumps(
            raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_jsonable
        )
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot hash its content ({exc})", field="session") from exc
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def str_list(values: Iterable[str], name: str) -> list[str]:
    """``values`` as a list of non-empty strings (ids, hashes); StoreError naming one."""
    if isinstance(values, (str, bytes)):
        raise StoreError("expected a collection of strings, got a single string", field=name)
    out = list(values)
    for i, value in enumerate(out):
        if not isinstance(value, str) or not value:
            raise StoreError(f"expected a non-empty string, got {value!r}", field=f"{name}[{i}]")
    return out


def check_model(m: Manifest, embedding_model: str, dim: int) -> None:
    """A write's model against the store's (``m``: its manifest or head)."""
    if not isinstance(embedding_model, str) or not embedding_model:
        raise StoreError("must be a non-empty string", field="embedding_model")
    if not isinstance(dim, int) or dim < 0:
        raise StoreError(f"must be a non-negative integer, got {dim!r}", field="dim")
    if (embedding_model == KEYWORD_ONLY_MODEL) != (dim == 0):
        raise StoreError(
            f"embedding_model/dim: a keyword-only store is "
            f"{KEYWORD_ONLY_MODEL!r} with dim 0, got {embedding_model!r} "
            f"with dim {dim}"
        )
    if m.embedding_model is not None and (m.embedding_model, m.dim) != (embedding_model, dim):
        raise StoreError(
            f"store uses {m.embedding_model!r} (dim {m.dim}), got {embedding_model!r} (dim {dim})",
            field="embedding_model",
        )


def check_memories(memories: Sequence[Memory], embedding_model: str, dim: int) -> None:
    """Every item a Memory, with a finite unit embedding of ``dim`` (none if dim 0)."""
    vectors = []
    for i, mem in enumerate(memories):
        if not isinstance(mem, Memory):
            raise StoreError(f"expected a Memory, got {type(mem).__name__}", field=f"memories[{i}]")
        where = f"memories[{i}] ({mem.memory_id})"
        if dim == 0:
            if mem.embedding is not None:
                raise StoreError("has an embedding but the store is keyword-only", field=where)
            continue
        if mem.embedding is None:
            raise StoreError(
                f"has no embedding; the store embeds with {embedding_model!r}", field=where
            )
        vec = np.asarray(mem.embedding, dtype=np.float32)
        if vec.shape != (dim,):
            raise StoreError(f"embedding has shape {vec.shape}, expected ({dim},)", field=where)
        vectors.append(vec)
    if vectors:
        norms = np.linalg.norm(np.stack(vectors), axis=1)
        bad = np.flatnonzero(~(np.abs(norms - 1.0) <= NORM_TOLERANCE))  # NaN is bad too
        if len(bad):
            raise StoreError(
                f"memories[{bad[0]}] ({memories[bad[0]].memory_id}): embedding "
                f"has L2 norm {norms[bad[0]]:.4f}; it must be finite and "
                f"normalised"
            )


def dedupe_batch(memories: Sequence[Memory]) -> tuple[list[Memory], int]:
    """``memories`` without repeats of a content hash, and how many were dropped; one id
    of one owner used for two different contents is an error."""
    seen: set[str] = set()  # content hashes within this batch
    ids: dict[OwnedId, str] = {}  # (app, user, memory_id) -> content_hash in this batch
    out: list[Memory] = []
    for mem in memories:
        if mem.content_hash in seen:
            continue
        key = (mem.app_name, mem.user_id, mem.memory_id)
        if ids.get(key, mem.content_hash) != mem.content_hash:
            raise StoreError(
                f"{mem.memory_id!r} is used by two memories with different content in this batch",
                field="memory_id",
            )
        seen.add(mem.content_hash)
        ids[key] = mem.content_hash
        out.append(mem)
    return out, len(memories) - len(out)


def forget_targets(
    memory_ids: Iterable[str],
    session: tuple[str, str, str] | None,
    user: tuple[str, str] | None,
    owner: tuple[str, str] | None,
    owned: Iterable[OwnedId],
    reason: str,
    actor: str,
) -> list[OwnedId]:
    """The checked arguments of a forget: the (app, user, memory_id) triples it names
    (``memory_ids`` of ``owner`` plus ``owned``), unique, in order."""
    for name, value in (("reason", reason), ("actor", actor)):
        if not isinstance(value, str):
            raise StoreError(f"expected a string, got {type(value).__name__}", field=name)
    ids = str_list(memory_ids, "memory_ids")
    if ids and owner is None:
        raise StoreError(
            "memory ids are unique per user: pass owner=(app_name, user_id)", field="owner"
        )
    targets: list[OwnedId] = [(owner[0], owner[1], i) for i in ids] if owner else []
    for i, triple in enumerate(owned):
        if not (
            isinstance(triple, tuple)
            and len(triple) == 3
            and all(isinstance(v, str) and v for v in triple)
        ):
            raise StoreError(
                f"expected (app_name, user_id, memory_id), got {triple!r}", field=f"owned[{i}]"
            )
        targets.append(triple)
    for what, key, size in (("session", session, 3), ("user", user, 2), ("owner", owner, 2)):
        if key is not None and (
            not isinstance(key, tuple)
            or len(key) != size
            or not all(isinstance(v, str) and v for v in key)
        ):
            raise StoreError(
                f"expected a tuple of {size} non-empty strings, got {key!r}", field=what
            )
    if not targets and session is None and user is None:
        raise StoreError("pass memory_ids with owner, owned, session or user", field="forget")
    return list(dict.fromkeys(targets))


__all__ = [
    "IMPORT_BATCH",
    "OwnedId",
    "SessionKey",
    "WriteResult",
    "check_memories",
    "check_model",
    "dedupe_batch",
    "forget_targets",
    "session_content_hash",
    "str_list",
]
