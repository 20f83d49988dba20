"""Where things live in a memory store directory (docs/architecture.md, "The store format").

```
STORE/
  manifest.json                  the committed state; nothing else is served
  memories/shard=NNNN/<seg>.parquet
  index/shard=NNNN/<seg>.faiss
  ledger/<name>.parquet          session content hashes already processed
  tombstones/<name>.jsonl        forget records
  quarantine/<name>.jsonl        rejected input with reasons
  runs/<run id>.json             one report per batch job (counts, throughput, status)
```
"""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path

from mnemoray.errors import InvalidInput

MANIFEST = "manifest.json"
LOCK = ".lock"
MEMORIES_DIR = "memories"
INDEX_DIR = "index"
LEDGER_DIR = "ledger"
TOMBSTONES_DIR = "tombstones"
QUARANTINE_DIR = "quarantine"
RUNS_DIR = "runs"
# Directories whose files are store data: present without a manifest, they are a lost one.
DATA_DIRS = (MEMORIES_DIR, INDEX_DIR, LEDGER_DIR, TOMBSTONES_DIR)


def repair_hint(root: Path) -> str:
    """The command an operator runs on a damaged store (named in every StoreCorrupt)."""
    return f"run `mnemoray doctor --repair {root}`"


def shard_of(app_name: str, user_id: str, shards: int) -> int:
    """Stable shard of a tenant: the same in every process and Python version.

    (Python's hash() of a str is salted per process, so it cannot be used.)
    """
    if shards < 1:
        raise InvalidInput(f"must be >= 1, got {shards}", field="shards")
    digest = hashlib.blake2b(f"{app_name}\x1f{user_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def shard_dir(shard: int) -> str:
    return f"shard={shard:04d}"


def new_name(prefix: str) -> str:
    """Unique, time-ordered file base name, e.g. ``seg-20250101T120000123456-1a2b3c4d``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time() % 1:.6f}"[2:]
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:8]}"


def parquet_path(root: Path, shard: int, name: str) -> Path:
    return root / MEMORIES_DIR / shard_dir(shard) / f"{name}.parquet"


def faiss_path(root: Path, shard: int, name: str) -> Path:
    return root / INDEX_DIR / shard_dir(shard) / f"{name}.faiss"
