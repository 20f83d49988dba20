"""A bounded least-recently-used map whose bound counts a weight per value (users a graph
part names, bytes of a table, or 1 per entry), shared by threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class WeighedCache(Generic[K, V]):
    """Keeps values while their weights add up to at most ``budget``, dropping the least
    recently used first (the newest always stays). A value heavier than ``max_item`` is
    not kept: reading it again is cheaper than evicting everything else for it."""

    def __init__(
        self,
        budget: float,
        weigh: Callable[[V], float] = lambda value: 1,
        max_item: float | None = None,
    ) -> None:
        self.budget = budget
        self.max_item = max_item
        self._weigh = weigh
        self._lock = threading.Lock()
        self._items: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._total = 0.0

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` (replacing what was there); returns ``value``."""
        weight = self._weigh(value)
        if self.max_item is not None and weight > self.max_item:
            return value
        with self._lock:
            old = self._items.pop(key, None)
            self._total -= 0 if old is None else old[1]
            self._items[key] = (value, weight)
            self._total += weight
            while self._total > self.budget and len(self._items) > 1:
                self._total -= self._items.popitem(last=False)[1][1]
        return value

    @property
    def total(self) -> float:
        """The weights of the kept values, added up."""
        return self._total

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first (a snapshot)."""
        with self._lock:
            return iter(list(self._items))

    def values(self) -> list[V]:
        with self._lock:
            return [value for value, _ in self._items.values()]


__all__ = ["WeighedCache"]
