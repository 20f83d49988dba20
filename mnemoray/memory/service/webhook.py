"""Memory lifecycle events POSTed to a URL (Serve's ``hooks.webhook_url``).

The webhook has its own queue and thread (a :class:`MemoryHooks` of its own): a
slow or unreachable endpoint delays nothing but its own deliveries, and a failed
POST is logged and counted there, never raised into a request.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable
from urllib.parse import urlparse

from mnemoray.errors import ConfigError
from mnemoray.memory.service.hooks import HOOK_NAMES, MemoryEvent, MemoryHooks

USER_AGENT = "mnemoray-webhook/1"


def check_webhook_url(url: str, field: str = "hooks.webhook_url") -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"expected an http(s) URL, got {url!r}", field=field)
    return url


class Webhook:
    """POST each event's JSON (:meth:`MemoryEvent.to_dict`) to ``url``; a non-2xx
    answer or a network error counts as a hook error."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        headers: dict[str, str] | None = None,
        max_queue: int = 1000,
    ) -> None:
        self.url = check_webhook_url(url)
        self.timeout_s = timeout_s
        self.headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            **(headers or {}),
        }
        self.outbox = MemoryHooks(max_queue)
        for name in HOOK_NAMES:
            self.outbox.register(name, self.post)

    def post(self, event: MemoryEvent) -> None:
        body = json.dumps(event.to_dict(), ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            if not 200 <= response.status < 300:
                raise OSError(f"webhook answered {response.status}")

    def attach(self, hooks: MemoryHooks, events: Iterable[str] = HOOK_NAMES) -> Webhook:
        """Forward ``events`` of ``hooks`` to this webhook's own queue."""
        for name in events:
            hooks.register(name, self.outbox.emit)
        hooks.add_stats(self.stats)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Post what is queued (within ``timeout_s``), then end the outbox thread."""
        self.outbox.stop(timeout_s)

    def stats(self) -> dict[str, int]:
        return {
            f"webhook_{k.removeprefix('hook_').removeprefix('hooks_')}": v
            for k, v in self.outbox.stats().items()
        }


__all__ = ["Webhook", "check_webhook_url"]
