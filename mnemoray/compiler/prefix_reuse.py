"""How often a compile's static prefix equals the previous one of the same agent
in the same session: a proxy for prefix-cache hits.

An inference server can reuse its cached attention for a prefix only when the
prefix is byte-identical; the static prefix is the part the compiler promises to
keep so. A miss means the agent's static instruction changed between two calls.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

Key = tuple[str, str, str, str]  # app, user, session, agent


@dataclass
class _Seen:
    prefix_hash: str
    checks: int = 0
    reused: int = 0


class PrefixReuse:
    """The last static-prefix hash per (app, user, session, agent), least recently
    compiled first out, and the counts over everything it has seen."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._seen: OrderedDict[Key, _Seen] = OrderedDict()
        self._lock = threading.Lock()
        self.checks = 0
        self.reused = 0

    def observe(self, key: Key, prefix_hash: str) -> dict[str, int | bool] | None:
        """Record this compile's hash; None for the key's first compile, else
        ``{"reused", "checks", "hits"}`` (the last two for this key)."""
        with self._lock:
            seen = self._seen.pop(key, None)
            if seen is None:
                self._seen[key] = _Seen(prefix_hash)
                while len(self._seen) > self.max_keys:
                    self._seen.popitem(last=False)
                return None
            reused = seen.prefix_hash == prefix_hash
            seen.checks += 1
            seen.reused += reused
            seen.prefix_hash = prefix_hash
            self._seen[key] = seen
            self.checks += 1
            self.reused += reused
            return {"reused": reused, "checks": seen.checks, "hits": seen.reused}

    @property
    def rate(self) -> float | None:
        with self._lock:
            return self.reused / self.checks if self.checks else None
