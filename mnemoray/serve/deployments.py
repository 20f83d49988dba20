"""The deployments that scale apart from the ingress: Embedder, Summarizer, Index.

The recall hot path never calls these (the ingress embeds the query and searches
in-process, whether it answers HTTP itself or behind Serve's proxy). They serve what
is heavy and scales on its own:

- ``Embedder``: bulk embedding of writes (online adds, session-end ingestion);
  the model is loaded once per replica and concurrent callers are batched by
  ``@serve.batch`` (counted in texts, not calls).
- ``Summarizer``: the configured summarizer for session-end distillation (the
  extractive default is cheap; a transformers / vLLM backend wants its own
  replicas, GPUs included).
- ``Index``: when a store outgrows one replica, its shards are spread over Index
  replicas with ``@serve.multiplexed``: the shard number is the model id, each
  replica loads (memory-maps) at most ``SHARDS_PER_INDEX_REPLICA`` shards, and
  Serve routes a request for shard S to a replica that already holds S. A
  user's memories live in exactly one shard, so every user-scoped operation is
  one call to one shard. Enabled with ``index_mode: deployment``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from ray import serve

from mnemoray.embedders import Embedder as CoreEmbedder
from mnemoray.embedders import EmbedderError, open_embedder
from mnemoray.http.ingestion import jobs_path
from mnemoray.http.memory import RemoteEmbedder, RemoteSummarizer
from mnemoray.http.models import local_embedder, local_summarizer
from mnemoray.http.parts import open_service
from mnemoray.memory.hygiene.attach import close_service
from mnemoray.memory.ingest.backends import open_job_queue
from mnemoray.memory.ingest.guard import guard_jobs
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.protocol import open_backend, require_parquet
from mnemoray.sessions.events import Event
from mnemoray.settings.serve import ServeSettings, parse_settings
from mnemoray.summarizers import get_summarizer
from mnemoray.summarizers.base import Summarizer as CoreSummarizer
from mnemoray.summarizers.base import Summary

log = logging.getLogger("ray.serve")

# Texts per Embedder batch: MiniLM's per-text cost flattens out by ~64-128 on CPU,
# and a bounded batch bounds a replica's memory and the latency of a small call
# queued behind a big one.
EMBED_MAX_TEXTS = 256
# Shards one Index replica holds (memory-mapped). With the default 8 shards one
# replica can hold a whole store; more replicas with fewer shards each spread it.
SHARDS_PER_INDEX_REPLICA = 8


def _texts_in(batch: list[list[str]]) -> int:
    return sum(len(texts) for texts in batch)


@serve.deployment(ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=64)
class Embedder:
    """One embedding model per replica; ``encode(texts)`` is batched across callers."""

    def __init__(self, store: str, spec: str) -> None:
        # The same embedder an in-process writer would get for this spec and store.
        self.embedder: CoreEmbedder | None = open_embedder(spec, open_backend(store), "write")
        self._bulk = asyncio.Semaphore(1)  # one large write at a time per replica

    def info(self) -> dict[str, Any] | None:
        e = self.embedder
        return None if e is None else {"model_id": e.model_id, "dim": e.dim}

    @serve.batch(max_batch_size=EMBED_MAX_TEXTS, batch_wait_timeout_s=0.01, batch_size_fn=_texts_in)
    async def encode(self, batch: list[list[str]]) -> list[np.ndarray]:
        # Writes are not latency-critical: wait up to 10 ms to merge concurrent callers.
        if self.embedder is None:
            raise EmbedderError("this store is keyword-only; nothing to embed", field="embedder")
        flat = [t for texts in batch for t in texts]
        vectors = await asyncio.get_running_loop().run_in_executor(
            None, self.embedder.encode, flat, 64
        )
        out, start = [], 0
        for texts in batch:
            out.append(vectors[start : start + len(texts)])
            start += len(texts)
        return out

    async def encode_bulk(self, texts: list[str]) -> np.ndarray:
        """A large write's texts, beside ``encode``'s batches rather than in them: merged
        into a batch, they would hold every small write of that batch until all of them
        are embedded (``RemoteEmbedder`` decides which calls are large)."""
        if self.embedder is None:
            raise EmbedderError("this store is keyword-only; nothing to embed", field="embedder")
        async with self._bulk:
            return await asyncio.get_running_loop().run_in_executor(
                None, self.embedder.encode, texts, 64
            )


@serve.deployment(ray_actor_options={"num_cpus": 0.1}, max_ongoing_requests=16)
class Summarizer:
    """The configured summarizer (``get_summarizer(name, **options)``) in its own replicas."""

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        self.summarizer = get_summarizer(name, **dict(options or {}))

    def info(self) -> dict[str, Any]:
        return {"name": getattr(self.summarizer, "name", type(self.summarizer).__name__)}

    def summarize(self, events: list[Event], prompt: str | None = None) -> Summary:
        return self.summarizer.with_prompt(prompt).summarize(events)

    def summarize_many(
        self, batches: list[list[Event]], prompt: str | None = None
    ) -> list[Summary]:
        return self.summarizer.with_prompt(prompt).summarize_many(batches)


async def remote_models(
    settings: ServeSettings, embedder_handle: Any, summarizer_handle: Any
) -> tuple[Any, Any]:
    """(embedder, summarizer) for writes: the deployments behind the core interfaces,
    or in-process models when a deployment is not configured (the embedder from
    ``open_embedder``, as the ``Embedder`` deployment opens it)."""
    loop = asyncio.get_running_loop()
    embedder: CoreEmbedder | None
    summarizer: CoreSummarizer
    if embedder_handle is not None:
        info = await embedder_handle.info.remote()
        embedder = (
            None
            if info is None
            else RemoteEmbedder(embedder_handle, info["model_id"], info["dim"], loop)
        )
    else:
        embedder = local_embedder(settings)
    if summarizer_handle is not None:
        summarizer = RemoteSummarizer(
            summarizer_handle, (await summarizer_handle.info.remote())["name"], loop
        )
    else:
        summarizer = local_summarizer(settings)
    return embedder, summarizer


@serve.deployment(ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=64)
class Index:
    """Memory shards, multiplexed by shard id (``handle.options(multiplexed_model_id=
    str(shard))``). Each loaded shard is the core ``MemoryService`` over
    ``MemoryStore(load_shards={shard})`` with its own watching reloader."""

    async def __init__(  # type: ignore[misc]  # Serve awaits an async constructor
        self,
        settings: Mapping[str, Any],
        embedder_handle: Any = None,
        summarizer_handle: Any = None,
    ) -> None:
        self.settings = parse_settings(settings)
        self.embedder, self.summarizer = await remote_models(
            self.settings, embedder_handle, summarizer_handle
        )

    @serve.multiplexed(max_num_models_per_replica=SHARDS_PER_INDEX_REPLICA)
    async def shard(self, shard_id: str) -> _ShardOps:
        shard = int(shard_id)
        s = self.settings

        def load() -> _ShardOps:
            # The location as configured (a URI stays one): open_backend, never a bare path.
            store = require_parquet(
                open_backend(s.store, s.shards, load_shards=[shard]),
                "server.index_mode: deployment",
            )
            # Wired as a whole-store server's service is (replica_parts.open_service);
            # scopes: sharing with a user of another shard is refused.
            service, attached = open_service(s, store, self.embedder, self.summarizer)
            try:
                jobs = guard_jobs(service, open_job_queue(jobs_path(s)))  # a forget cancels jobs
            except BaseException:
                with contextlib.suppress(Exception):
                    close_service(service, *attached)
                raise
            return _ShardOps(service, *attached, jobs)

        return await asyncio.get_running_loop().run_in_executor(None, load)

    async def call(
        self, op: str, app_name: str, user_id: str, kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        ops = await self.shard(serve.get_multiplexed_model_id())
        if op == "recall":  # in-memory work, short for one user: no thread hop
            return ops.call(op, app_name, user_id, kwargs)
        return await asyncio.get_running_loop().run_in_executor(
            None, ops.call, op, app_name, user_id, kwargs
        )


class _ShardOps(MemoryOps):
    """A shard's operations; Serve calls ``__del__`` when it evicts the shard (LRU)."""

    def __init__(self, service: MemoryService, *attached: Any) -> None:
        super().__init__(service)
        self._attached = attached  # hygiene, webhook, job queue: stopped with the shard

    def __del__(self) -> None:
        service = getattr(self, "service", None)
        if service is not None:
            hygiene, *rest = getattr(self, "_attached", (None,)) or (None,)
            close_service(service, hygiene, *rest)
