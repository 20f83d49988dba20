"""The memory service behind HTTP: JSON in and out, and models in other replicas.

- the JSON operations over the core ``MemoryService`` are
  :class:`mnemoray.memory.service.json_ops.MemoryOps` (shared with the MCP server);
- :class:`RemoteEmbedder` / :class:`RemoteSummarizer` put the ``Embedder`` and
  ``Summarizer`` deployments behind the core interfaces, so the core write path
  (distill -> embed -> commit) runs unchanged with its models in other replicas.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from mnemoray.embedders import Embedder
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.service.webhook import Webhook
from mnemoray.sessions.events import Event
from mnemoray.summarizers.base import Summarizer, Summary

log = logging.getLogger(__name__)


def attach_webhook(service: MemoryService, hooks: Any) -> Webhook | None:
    """Post the service's lifecycle events to ``hooks.webhook_url`` (Serve's ``hooks``
    settings group), off the request path; None when no URL is set."""
    if not getattr(hooks, "webhook_url", None):
        return None
    return Webhook(hooks.webhook_url, timeout_s=hooks.webhook_timeout_s).attach(
        service.hooks, hooks.webhook_events
    )


# -- remote models behind the core interfaces ----------------------------------------------
def call_on_loop(
    loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[Any]], timeout_s: float | None
) -> Any:
    """Run ``await make()`` on the replica's event loop from a worker thread, blocking.

    Deployment handles are awaited on the loop they belong to: a sync ``.result()``
    is not available when Serve runs the router on the replica's own loop
    (``RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0``), and this works either way.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError(
            "a blocking model call on the event loop would deadlock; call it from a worker thread"
        )

    async def run() -> Any:
        return await make()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout_s)


class RemoteEmbedder(Embedder):
    """The ``Embedder`` deployment as a core :class:`Embedder`. ``encode`` blocks, so it
    runs in worker threads (the write path does); the calls themselves are awaited on
    ``loop``. A small call (at most ``small_texts`` texts and ``small_chars``
    characters) joins the deployment's batches of concurrent small writes; a larger one
    goes to its bulk lane beside them, in chunks of ``chunk`` texts, so that one large
    write never holds a small write's batch."""

    #: What a call may hold to be batched with other writes' calls.
    small_texts = 8
    small_chars = 8_192

    def __init__(
        self,
        handle: Any,
        model_id: str,
        dim: int,
        loop: asyncio.AbstractEventLoop,
        *,
        chunk: int = 128,
        timeout_s: float = 300.0,
    ) -> None:
        self._handle = handle
        self._loop = loop
        self.model_id = model_id
        self.dim = dim
        self.chunk = chunk
        self.timeout_s = timeout_s

    def _encode(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        small = len(texts) <= self.small_texts and sum(map(len, texts)) <= self.small_chars
        method = self._handle.encode if small else self._handle.encode_bulk
        chunks = [texts[i : i + self.chunk] for i in range(0, len(texts), self.chunk)]

        async def fan_out() -> list[Any]:
            return list(await asyncio.gather(*(method.remote(c) for c in chunks)))

        parts = call_on_loop(self._loop, fan_out, self.timeout_s)
        return np.concatenate([np.asarray(p, dtype=np.float32) for p in parts])


class RemoteSummarizer(Summarizer):
    """The ``Summarizer`` deployment as a core :class:`Summarizer` (blocking, like
    :class:`RemoteEmbedder`)."""

    def __init__(
        self, handle: Any, name: str, loop: asyncio.AbstractEventLoop, *, timeout_s: float = 600.0
    ) -> None:
        self._handle = handle
        self._loop = loop
        self.name = name
        self.timeout_s = timeout_s

    prompt: str | None = None  # passed to the deployment's summarizer (with_prompt)

    def with_prompt(self, prompt: str | None) -> RemoteSummarizer:
        if prompt == self.prompt:
            return self
        clone = copy.copy(self)
        clone.prompt = prompt
        return clone

    def summarize(self, events: Sequence[Event]) -> Summary:
        return call_on_loop(
            self._loop,
            lambda: self._handle.summarize.remote(list(events), self.prompt),
            self.timeout_s,
        )

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        return call_on_loop(
            self._loop,
            lambda: self._handle.summarize_many.remote([list(b) for b in batches], self.prompt),
            self.timeout_s,
        )
