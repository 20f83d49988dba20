"""Garbage collection in the Parquet store, a part of
:class:`~mnemoray.memory.store.parquet.store.MemoryStore` (``StoreGC``): the files no
committed manifest lists."""

from __future__ import annotations

import time
from pathlib import Path

from mnemoray.files import TMP_SUFFIX
from mnemoray.memory.store.graph.parts import GRAPH_DIR, listed_files
from mnemoray.memory.store.layout import (
    INDEX_DIR,
    LEDGER_DIR,
    MEMORIES_DIR,
    QUARANTINE_DIR,
    TOMBSTONES_DIR,
    faiss_path,
    parquet_path,
)
from mnemoray.memory.store.parquet.state import StoreState


class StoreGC:
    """``gc`` (a part of ``MemoryStore``)."""

    def __init__(self, state: StoreState) -> None:
        self._state = state

    # -- maintenance --------------------------------------------------------
    def gc(self, grace_s: float = 0.0) -> list[Path]:
        """Delete files no committed manifest lists (a crashed writer's leftovers).

        Prepared-but-uncommitted segments are such files too: while other
        writers may be between prepare and commit, pass a grace period longer
        than that gap (their commit fails cleanly if its files were removed).
        """
        root = self._state.root
        with self._state.locked():
            m = self._state.manifest()
            keep = {root / LEDGER_DIR / n for n in m.ledger}
            keep |= {root / TOMBSTONES_DIR / n for n in m.tombstones}
            keep |= listed_files(root, m)
            for shard, entries in enumerate(m.segments):
                for e in entries:
                    keep |= {
                        parquet_path(root, shard, e.name),
                        faiss_path(root, shard, e.name),
                    }
            now, removed = time.time(), []
            candidates = [
                p
                for sub in (MEMORIES_DIR, INDEX_DIR, LEDGER_DIR, TOMBSTONES_DIR, GRAPH_DIR)
                for p in (root / sub).rglob("*")
            ]
            candidates += list((root / QUARANTINE_DIR).glob(f"*{TMP_SUFFIX}"))
            candidates += list(root.glob(f".*{TMP_SUFFIX}"))
            for path in candidates:
                if path.is_file() and path not in keep and now - path.stat().st_mtime >= grace_s:
                    path.unlink()
                    removed.append(path)
            return sorted(removed)
