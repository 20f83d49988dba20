"""The store contract's helpers: every MemoryBackend, opened by its location.

``store_opener(kind, tmp_path)`` gives ``open_store("name")``, which opens
``tmp_path/name`` through ``open_backend`` with that backend's scheme, the way a user's
``--store`` setting does; a fixture parametrized over ``BACKENDS`` runs a test once per
backend (tests/memory/store/test_backend_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.protocol import MemoryBackend, open_backend

DIM = 16
MODEL = "test-model"
BACKENDS = ("parquet", "lancedb")

OpenStore = Callable[..., MemoryBackend]


def unit(rng: np.random.Generator, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def make(
    rng: np.random.Generator,
    app: str = "app",
    user: str = "u0",
    session: str = "s0",
    n: int = 1,
    start: int = 0,
    kind: str = "fact",
    **kw,
) -> list[Memory]:
    return [
        Memory(
            app,
            user,
            session,
            kind,
            f"{app}/{user}/{session} note {start + i}",
            created_at=1000.0 + start + i,
            **kw,
        ).with_embedding(unit(rng))
        for i in range(n)
    ]


def location(kind: str, path: Path) -> str:
    return f"{kind}://{path}"


def store_opener(kind: str, root: Path) -> OpenStore:
    """``open_store(name)``: the ``kind`` store at ``root/name``, opened by its location."""

    def opener(name: str = "store", **kw) -> MemoryBackend:
        return open_backend(location(kind, root / name), **kw)

    return opener


def new_rng() -> np.random.Generator:
    return np.random.default_rng(3)


__all__ = [
    "BACKENDS",
    "DIM",
    "MODEL",
    "OpenStore",
    "location",
    "make",
    "new_rng",
    "store_opener",
    "unit",
]
