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

from mnemoray.embedders.base import KEYWORD_ONLY_MODEL
from mnemoray.errors import StoreCorrupt
from mnemoray.files import TMP_SUFFIX, atomic_write_bytes
from mnemoray.memory.store.layout import (
    DATA_DIRS,
    MANIFEST,
    faiss_path,
    parquet_path,
    repair_hint,
)

FORMAT = "mnemoray.memory_store"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SegmentEntry:
    """One committed segment: ``<name>.parquet`` (+ ``<name>.faiss`` if indexed)."""

    name: str
    rows: int
    version: int  # manifest version that committed it; tombstones apply to older ones
    index: str | None  # "flat" | "hnsw" | "ivf"; None in a keyword-only store

    def files(self, root: Path, shard: int) -> list[Path]:
        """Its files in the store at ``root``: the Parquet rows, then the index if any."""
        parquet = parquet_path(root, shard, self.name)
        return [parquet, faiss_path(root, shard, self.name)] if self.index else [parquet]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parquet": f"{self.name}.parquet",
            "faiss": f"{self.name}.faiss" if self.index else None,
            "rows": self.rows,
            "version": self.version,
            "index": self.index,
        }


@dataclass(frozen=True)
class GraphPart:
    """One committed part of a shard's entity graph (``mnemoray.memory.store.graph.parts``):
    the rows of the users it lists, which win over older parts' rows of those users."""

    name: str
    users: int  # (app, user) pairs it holds the whole graph of (none: a forgotten user)
    version: int  # manifest version that committed it

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "users": self.users, "version": self.version}


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
    # Per shard, the entity graph's parts, oldest first (empty: no graph rows).
    graph: list[list[GraphPart]] = field(default_factory=list)
    ledger_sessions: int = 0
    tombstone_count: int = 0
    updated_at: float = 0.0

    def __post_init__(self) -> None:
        if not self.segments:
            self.segments = [[] for _ in range(self.shards)]
        if not self.graph:
            self.graph = [[] for _ in range(self.shards)]

    @property
    def rows(self) -> int:
        return sum(seg.rows for shard in self.segments for seg in shard)

    @property
    def keyword_only(self) -> bool:
        return self.embedding_model == KEYWORD_ONLY_MODEL

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "version": self.version,
            "shards": self.shards,
            "embedding": (
                None
                if self.embedding_model is None
                else {"model": self.embedding_model, "dim": self.dim}
            ),
            "summarizer": self.summarizer,
            "segments": {
                f"{i:04d}": [s.to_dict() for s in segs] for i, segs in enumerate(self.segments)
            },
            "ledger": list(self.ledger),
            "tombstones": list(self.tombstones),
            "graph": {
                f"{i:04d}": [p.to_dict() for p in parts]
                for i, parts in enumerate(self.graph)
                if parts
            },
            "counts": {
                "rows": self.rows,
                "segments": sum(len(s) for s in self.segments),
                "ledger_sessions": self.ledger_sessions,
                "tombstones": self.tombstone_count,
            },
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Manifest:
        if raw.get("format") != FORMAT:
            raise StoreCorrupt(f"manifest: format is {raw.get('format')!r}, expected {FORMAT!r}")
        if raw.get("format_version") != FORMAT_VERSION:
            raise StoreCorrupt(
                f"manifest: unsupported format_version {raw.get('format_version')!r}"
            )
        shards = int(raw["shards"])
        if shards < 1:
            raise StoreCorrupt(f"manifest: shards is {shards}, expected >= 1")
        segments: list[list[SegmentEntry]] = [[] for _ in range(shards)]
        for key, entries in raw["segments"].items():
            shard = int(key)
            if not 0 <= shard < shards:
                raise StoreCorrupt(f"manifest: segment shard {key} outside 0..{shards - 1}")
            segments[shard] = [
                SegmentEntry(e["name"], int(e["rows"]), int(e["version"]), e["index"])
                for e in entries
            ]
        graph: list[list[GraphPart]] = [[] for _ in range(shards)]
        for key, parts in (raw.get("graph") or {}).items():
            shard = int(key)
            if not 0 <= shard < shards:
                raise StoreCorrupt(f"manifest: graph shard {key} outside 0..{shards - 1}")
            graph[shard] = [GraphPart(p["name"], int(p["users"]), int(p["version"])) for p in parts]
        embedding = raw.get("embedding")
        if embedding is not None:
            model, dim = embedding["model"], int(embedding["dim"])
            if (
                not isinstance(model, str)
                or not model
                or dim < 0
                or ((model == KEYWORD_ONLY_MODEL) != (dim == 0))
            ):
                raise StoreCorrupt(
                    f"manifest: embedding {embedding!r} is not a model id with "
                    f"its dim ({KEYWORD_ONLY_MODEL!r} with 0 for keyword-only)"
                )
        counts = raw.get("counts") or {}
        return cls(
            shards=shards,
            version=int(raw["version"]),
            embedding_model=embedding["model"] if embedding else None,
            dim=int(embedding["dim"]) if embedding else None,
            summarizer=raw.get("summarizer"),
            segments=segments,
            ledger=list(raw.get("ledger") or []),
            tombstones=list(raw.get("tombstones") or []),
            graph=graph,
            ledger_sessions=int(counts.get("ledger_sessions", 0)),
            tombstone_count=int(counts.get("tombstones", 0)),
            updated_at=float(raw.get("updated_at") or 0.0),
        )


def load_manifest(root: Path) -> Manifest | None:
    """The manifest file as it is, or None when there is none (no check of the directory)."""
    path = root / MANIFEST
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, no permission, an I/O error
        raise StoreCorrupt(f"manifest: cannot read {path} ({exc}); {repair_hint(root)}") from exc
    try:
        raw = json.loads(data.decode("utf-8"))
        if not isinstance(raw, dict):
            raise TypeError(f"expected a JSON object, got {type(raw).__name__}")
        return Manifest.from_dict(raw)
    except StoreCorrupt as exc:
        raise StoreCorrupt(f"{exc} in {path}; {repair_hint(root)}") from exc
    except (
        UnicodeDecodeError,
        json.JSONDecodeError,
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
    ) as exc:
        raise StoreCorrupt(
            f"manifest: {path} is not a valid manifest ({exc}); {repair_hint(root)}"
        ) from exc


def data_files(root: Path) -> list[Path]:
    """Store data files under ``root`` (segments, indexes, ledger, tombstones; no temp files)."""
    return sorted(
        p
        for sub in DATA_DIRS
        for p in (root / sub).rglob("*")
        if p.is_file() and not p.name.endswith(TMP_SUFFIX)
    )


def read_manifest(root: Path) -> Manifest | None:
    """The committed manifest, or None for a store nothing was written to yet.

    A directory that holds store data but no manifest lost it (deleted, a bad
    copy): treating it as a new store would shadow the data, and ``gc`` would
    delete it, so it is refused. Writers publish a first, empty manifest before
    their first data file, so a crashed first run does not look like this.
    """
    m = load_manifest(root)
    if m is not None:
        return m
    found = data_files(root)
    if found:
        raise StoreCorrupt(
            f"no {MANIFEST} in {root}, but it holds {len(found)} store "
            f"file(s) (e.g. {found[0].relative_to(root)}): the manifest is "
            f"lost; {repair_hint(root)}"
        )
    return None


def write_manifest(root: Path, manifest: Manifest) -> None:
    manifest.updated_at = time.time()
    data = json.dumps(manifest.to_dict(), indent=1, sort_keys=False).encode("utf-8")
    atomic_write_bytes(root / MANIFEST, data)
