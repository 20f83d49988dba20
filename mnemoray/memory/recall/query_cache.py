"""Recent query vectors, shared by every way of encoding a query.

A compile's memory preload and the agent's ``load_memory`` call often ask the
same thing, and so do clients retrying; an LRU of read-only vectors answers those
without the model. The in-process service and the servers' batched query encoder
(:mod:`mnemoray.embedders.query_encoder`) both use this one cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from mnemoray.errors import InvalidInput

QUERY_CACHE_SIZE = 4096  # vectors kept (~1.5 KB each at 384-d)


class QueryVectorCache:
    """A thread-safe LRU of query text -> read-only vector."""

    def __init__(self, size: int = QUERY_CACHE_SIZE) -> None:
        if size < 0:
            raise InvalidInput(f"must be >= 0, got {size}", field="size")
        self.size = size
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vec = self._items.get(text)
            if vec is None:
                self.misses += 1
                return None
            self._items.move_to_end(text)
            self.hits += 1
            return vec

    def put(self, text: str, vec: np.ndarray) -> np.ndarray:
        vec.flags.writeable = False  # shared by every later caller of the same query
        if self.size:
            with self._lock:
                self._items[text] = vec
                self._items.move_to_end(text)
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return vec

    def encode(self, text: str, encode_one: Callable[[str], np.ndarray]) -> np.ndarray:
        """The cached vector of ``text``, else ``encode_one(text)`` (then cached)."""
        vec = self.get(text)
        return vec if vec is not None else self.put(text, encode_one(text))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
