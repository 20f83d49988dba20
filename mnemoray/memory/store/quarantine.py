"""Rejected input, kept with its reason: a bad row never stops a job and is never lost.

Each call writes one new JSONL file, so parallel workers never interleave
lines. Rows carry a key over (location, reason, raw): a rerun that
quarantines the same rows again does not inflate the count.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mnemoray.errors import StoreError
from mnemoray.files import atomic_write_bytes
from mnemoray.memory.store.layout import QUARANTINE_DIR, new_name


def write_quarantine(root: Path, rows: Sequence[Mapping[str, Any]]) -> int:
    """Record rows with ``location``, ``reason`` and ``raw``; returns how many."""
    lines = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise StoreError(f"expected a mapping, got {type(row).__name__}", field=f"rows[{i}]")
        for key in ("location", "reason"):
            if not isinstance(row.get(key), str) or not row.get(key):
                raise StoreError("expected a non-empty string", field=f"rows[{i}].{key}")
        if "raw" not in row:
            raise StoreError("missing", field=f"rows[{i}].raw")
        # Never fail to quarantine: values JSON cannot hold are kept as their repr.
        try:
            raw = json.loads(json.dumps(row["raw"], ensure_ascii=False, default=repr))
        except RecursionError:  # hostile nesting: keep what it was, not the row
            raw = f"<{type(row['raw']).__name__} nested too deeply to keep>"
        key = hashlib.sha256(
            json.dumps([row["location"], row["reason"], raw], sort_keys=True).encode()
        ).hexdigest()[:16]
        record = {
            "key": key,
            "location": row["location"],
            "reason": row["reason"],
            "raw": raw,
            "at": time.time(),
        }
        line = json.dumps(record, ensure_ascii=False)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: kept as its JSON escape (\ud800)
            line = json.dumps(record, ensure_ascii=True)
        lines.append(line)
    if lines:
        atomic_write_bytes(
            root / QUARANTINE_DIR / f"{new_name('q')}.jsonl",
            ("\n".join(lines) + "\n").encode("utf-8"),
        )
    return len(lines)


def read_quarantine(root: Path) -> list[dict[str, Any]]:
    """Quarantined rows, oldest first, each distinct row once."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((root / QUARANTINE_DIR).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["key"], row)
    return list(out.values())
