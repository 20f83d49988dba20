"""The manifest: the one file that says what a memory store contains.

A commit writes its data files first, then replaces manifest.json in one
atomic rename. Files the manifest does not list (a crashed writer's
leftovers) are never served and are removed by ``MemoryStore.gc``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemoray.errors import InvalidInput, StoreCorrupt
from mnemoray.memory.files import atomic_write_bytes
from mnemoray.memory.layout import MANIFEST

FORMAT = "mnemoray.memory_store"
FORMAT_VERSION = 1
KEYWORD_ONLY_MODEL = "none"


class StoreError(InvalidInput):
    """A memory store operation was given bad input; ``field`` names it.

    A damaged store (manifest, segment or index file) raises
    :class:`mnemoray.errors.StoreCorrupt` instead: not the caller's fault."""


@dataclass(frozen=True)
class SegmentEntry:
    """One committed segment: ``<name>.parquet`` (+ ``<name>.faiss`` if indexed)."""

    name: str
    rows: int
    version: int  # manifest version that committed it; tombstones apply to older ones
    index: str | None  # "flat" | "hnsw" | "ivf"; None in a keyword-only store

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "parquet": f"{self.name}.parquet",
                "faiss": f"{self.name}.faiss" if self.index else None,
                "rows": self.rows, "version": self.version, "index": self.index}


@dataclass
class Manifest:
    shards: int
    version: int = 0
    embedding_model: str | None = None  # KEYWORD_ONLY_MODEL for a store without vectors
    dim: int | None = None
    summarizer: str | None = None
    segments: list[list[SegmentEntry]] = field(default_factory=list)
    ledger: list[str] = field(default_factory=list)  # file names under ledger/
    tombstones: list[str] = field(default_factory=list)  # file names under tombstones/
    ledger_sessions: int = 0
    tombstone_count: int = 0
    updated_at: float = 0.0

    def __post_init__(self) -> None:
        if not self.segments:
            self.segments = [[] for _ in range(self.shards)]

    @property
    def rows(self) -> int:
        return sum(seg.rows for shard in self.segments for seg in shard)

    @property
    def keyword_only(self) -> bool:
        return self.embedding_model == KEYWORD_ONLY_MODEL

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "version": self.version,
            "shards": self.shards,
            "embedding": (None if self.embedding_model is None
                          else {"model": self.embedding_model, "dim": self.dim}),
            "summarizer": self.summarizer,
            "segments": {f"{i:04d}": [s.to_dict() for s in segs]
                         for i, segs in enumerate(self.segments)},
            "ledger": list(self.ledger),
            "tombstones": list(self.tombstones),
            "counts": {"rows": self.rows,
                       "segments": sum(len(s) for s in self.segments),
                       "ledger_sessions": self.ledger_sessions,
                       "tombstones": self.tombstone_count},
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Manifest:
        if raw.get("format") != FORMAT:
            raise StoreCorrupt(f"manifest: format is {raw.get('format')!r}, expected {FORMAT!r}")
        if raw.get("format_version") != FORMAT_VERSION:
            raise StoreCorrupt(
                f"manifest: unsupported format_version {raw.get('format_version')!r}")
        shards = int(raw["shards"])
        segments: list[list[SegmentEntry]] = [[] for _ in range(shards)]
        for key, entries in raw["segments"].items():
            shard = int(key)
            if not 0 <= shard < shards:
                raise StoreCorrupt(f"manifest: segment shard {key} outside 0..{shards - 1}")
            segments[shard] = [SegmentEntry(e["name"], int(e["rows"]), int(e["version"]),
                                            e["index"]) for e in entries]
        embedding = raw.get("embedding")
        counts = raw.get("counts") or {}
        return cls(
            shards=shards, version=int(raw["version"]),
            embedding_model=embedding["model"] if embedding else None,
            dim=int(embedding["dim"]) if embedding else None,
            summarizer=raw.get("summarizer"), segments=segments,
            ledger=list(raw.get("ledger") or []), tombstones=list(raw.get("tombstones") or []),
            ledger_sessions=int(counts.get("ledger_sessions", 0)),
            tombstone_count=int(counts.get("tombstones", 0)),
            updated_at=float(raw.get("updated_at") or 0.0),
        )


def read_manifest(root: Path) -> Manifest | None:
    """The committed manifest, or None for a store nothing was committed to yet."""
    path = root / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return Manifest.from_dict(json.loads(text))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise StoreCorrupt(f"manifest: {path} is not a valid manifest ({exc})") from exc


def write_manifest(root: Path, manifest: Manifest) -> None:
    manifest.updated_at = time.time()
    data = json.dumps(manifest.to_dict(), indent=1, sort_keys=False).encode("utf-8")
    atomic_write_bytes(root / MANIFEST, data)
