"""The memory record: one searchable unit distilled from a session."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnemoray import limits
from mnemoray.errors import InvalidInput
from mnemoray.memory.records.agent_names import check_agent_name
from mnemoray.memory.records.kinds import MEMORY_KINDS, MemoryKind  # re-exported (numpy-free home)


class MemoryRecordError(InvalidInput):
    """A memory record is malformed; the message names the field."""


def content_hash(*parts: str) -> str:
    """Stable identity of a record's content: re-ingesting it adds nothing."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class MemoryVersion:
    """An earlier text of an edited memory: its id then, its words, and when and by
    whom those words were written (``written_by`` "": distilled or added as is)."""

    memory_id: str
    text: str
    written_at: float
    written_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "text": self.text,
            "written_at": self.written_at,
            "written_by": self.written_by,
        }

    @classmethod
    def from_dict(cls, raw: Any) -> MemoryVersion:
        if isinstance(raw, MemoryVersion):
            return raw
        if not isinstance(raw, dict):
            raise MemoryRecordError(
                f"expected an object, got {type(raw).__name__}", field="previous_versions"
            )
        try:
            return cls(
                str(raw["memory_id"]),
                str(raw["text"]),
                float(raw["written_at"]),
                str(raw.get("written_by") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MemoryRecordError(
                f"malformed version ({exc})", field="previous_versions"
            ) from exc


# Fields set after a record is made that no text, hash or id depends on (``with_derived``).
DERIVED_FIELDS = frozenset({"embedding", "shard", "session_events", "session_updated_at"})
# Lists of strings on a record (besides source ids): what a summary said.
TEXT_LISTS = ("topics", "key_facts", "entities", "open_threads", "decisions", "commitments")


@dataclass(frozen=True)
class Memory:
    app_name: str
    user_id: str
    session_id: str
    kind: MemoryKind
    text: str  # what recall returns: the original words
    source_event_ids: tuple[str, ...] = ()
    # What is embedded and keyword-indexed: the text, optionally expanded with
    # the chunk's facts and topics so paraphrased queries still land.
    key_text: str = ""
    topics: tuple[str, ...] = ()
    key_facts: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    event_time_start: float | None = None
    event_time_end: float | None = None
    created_at: float = field(default_factory=time.time)
    expires_at: float | None = None  # TTL: never returned after this instant
    memory_id: str = ""
    content_hash: str = ""
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    shard: int = -1
    # The version of the session copy this record was distilled from: its event count
    # and update time (None: unknown, e.g. raw memories or stores written before them).
    # An older copy read later must never replace a newer one; not part of the content.
    session_events: int | None = None
    session_updated_at: float | None = None
    # What the summarizer left open, and the decisions and commitments it found
    # are kept on summary records, empty where the summarizer yields none.
    open_threads: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    commitments: tuple[str, ...] = ()
    # Corrections (mnemoray.memory.records.edit): who wrote this text and when (None: never
    # edited), and the texts it replaced, oldest first.
    edited_at: float | None = None
    edited_by: str | None = None
    previous_versions: tuple[MemoryVersion, ...] = ()
    # Scope (mnemoray.memory.store.scopes): "" = every agent of the app sees it; a name = only
    # that agent's recall does, and it is never shared with another app.
    agent_name: str = ""

    def __post_init__(self) -> None:
        for name in ("app_name", "user_id", "session_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise MemoryRecordError("must be a non-empty string", field=name)
        if self.kind not in MEMORY_KINDS:
            raise MemoryRecordError(
                f"{self.kind!r} is not one of {', '.join(MEMORY_KINDS)}", field="kind"
            )
        if not isinstance(self.text, str) or not self.text.strip():
            raise MemoryRecordError("must be a non-empty string", field="text")
        self._check_values()
        check_agent_name(self.agent_name, MemoryRecordError)
        if not self.key_text:
            object.__setattr__(self, "key_text", self.text)
        if not self.content_hash:
            # The agent is part of the identity only when set: shared records keep the
            # hashes (and ids) they had before scopes existed.
            scope = (f"agent:{self.agent_name}",) if self.agent_name else ()
            object.__setattr__(
                self,
                "content_hash",
                content_hash(
                    self.app_name,
                    self.user_id,
                    self.session_id,
                    self.kind,
                    self.text,
                    ",".join(self.source_event_ids),
                    *scope,
                ),
            )
        if not self.memory_id:
            object.__setattr__(self, "memory_id", self.content_hash[:24])

    def _check_values(self) -> None:
        """Times in the valid range, valid Unicode: recall answers them as JSON and ISO
        dates, and Parquet stores them (``mnemoray.limits``)."""
        for name in (
            "event_time_start",
            "event_time_end",
            "created_at",
            "expires_at",
            "session_updated_at",
            "edited_at",
        ):
            limits.check_optional_time(getattr(self, name, None), name, MemoryRecordError)
        for name in ("app_name", "user_id", "session_id", "text", "key_text", "memory_id"):
            value = getattr(self, name)
            if isinstance(value, str):
                limits.text_bytes(value, name, MemoryRecordError)
        for name in ("source_event_ids", *TEXT_LISTS):
            for i, value in enumerate(getattr(self, name)):
                if isinstance(value, str):
                    limits.text_bytes(value, f"{name}[{i}]", MemoryRecordError)
        if self.edited_by is not None:
            limits.text_bytes(self.edited_by, "edited_by", MemoryRecordError)
        for i, version in enumerate(self.previous_versions):
            if not isinstance(version, MemoryVersion):
                raise MemoryRecordError("expected a MemoryVersion", field=f"previous_versions[{i}]")

    @classmethod
    def stored(cls, values: dict[str, Any], embedding: np.ndarray | None) -> Memory:
        """A record read back from a store: every value was checked (and the identity
        derived) when it was written, so reading, recall's hot path, checks nothing again.
        ``values``: every field but ``embedding``, in the types a record holds."""
        record = object.__new__(cls)
        record.__dict__.update(values)  # frozen: no __setattr__; the fields are the dict
        record.__dict__["embedding"] = embedding
        return record

    def with_embedding(self, vector: np.ndarray) -> Memory:
        return self.with_derived(embedding=np.asarray(vector, dtype=np.float32))

    def with_derived(self, **values: Any) -> Memory:
        """A copy with ``values`` set, of the fields no text or identity depends on
        (``DERIVED_FIELDS``: the embedding, the shard, the session version). Only the new
        values are checked: ``replace`` would check every text of the record again, which
        a backfill did three times per record (embed, version stamp, shard)."""
        unknown = set(values) - DERIVED_FIELDS
        if unknown:
            raise TypeError(
                f"with_derived sets only {sorted(DERIVED_FIELDS)}, not {sorted(unknown)}"
            )
        if "session_updated_at" in values:
            limits.check_optional_time(
                values["session_updated_at"], "session_updated_at", MemoryRecordError
            )
        record = object.__new__(Memory)
        record.__dict__.update(self.__dict__)  # frozen: no __setattr__; the fields are the dict
        record.__dict__.update(values)
        return record

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or time.time())

    def to_dict(self, with_embedding: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "memory_id": self.memory_id,
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "kind": self.kind,
            "text": self.text,
            "key_text": self.key_text,
            "topics": list(self.topics),
            "key_facts": list(self.key_facts),
            "entities": list(self.entities),
            "source_event_ids": list(self.source_event_ids),
            "event_time_start": self.event_time_start,
            "event_time_end": self.event_time_end,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "content_hash": self.content_hash,
            "shard": self.shard,
            "session_events": self.session_events,
            "session_updated_at": self.session_updated_at,
            "open_threads": list(self.open_threads),
            "decisions": list(self.decisions),
            "commitments": list(self.commitments),
            "edited_at": self.edited_at,
            "edited_by": self.edited_by,
            "previous_versions": [v.to_dict() for v in self.previous_versions],
            "agent_name": self.agent_name,
        }
        if with_embedding and self.embedding is not None:
            out["embedding"] = [float(x) for x in self.embedding]
        return out

    def to_json(self, with_embedding: bool = False) -> str:
        return json.dumps(self.to_dict(with_embedding), ensure_ascii=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Memory:
        if not isinstance(raw, dict):
            raise MemoryRecordError(f"expected an object, got {type(raw).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = set(raw) - known
        if unknown:
            raise MemoryRecordError("unknown memory field", field=sorted(unknown)[0])
        kwargs = {k: v for k, v in raw.items() if v is not None}
        for name in ("source_event_ids", *TEXT_LISTS):
            if name in kwargs:
                if not isinstance(kwargs[name], (list, tuple, np.ndarray)):
                    raise MemoryRecordError("expected a list", field=name)
                kwargs[name] = tuple(str(x) for x in kwargs[name])
        if "previous_versions" in kwargs:
            if not isinstance(kwargs["previous_versions"], (list, tuple)):
                raise MemoryRecordError("expected a list", field="previous_versions")
            kwargs["previous_versions"] = tuple(
                MemoryVersion.from_dict(v) for v in kwargs["previous_versions"]
            )
        if "embedding" in kwargs:
            kwargs["embedding"] = np.asarray(kwargs["embedding"], dtype=np.float32)
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise MemoryRecordError(str(exc)) from exc
