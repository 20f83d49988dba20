"""Distill sessions into memory records: the core ``distill_sessions`` in an actor pool.

The summarizer is built once per actor by ``get_summarizer`` (the same
registry the in-process path and the online service use), so a backend that
loads weights (``transformers``) loads them once per actor. A session the
summarizer fails on is quarantined from the worker, with the reason.
For vLLM on GPUs see ``mnemoray.pipeline.llm`` (``ray.data.llm``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mnemoray.backfill.busy import Busy
from mnemoray.backfill.steps import distill_sessions
from mnemoray.memory.store.protocol import open_backend
from mnemoray.memory.store.scopes import ScopePolicy
from mnemoray.pipeline.placement import actor_tally
from mnemoray.pipeline.rows import lighten, pack, unpack
from mnemoray.summarizers import get_summarizer


class Distill:
    """``map_batches`` callable: items in, items with (unembedded) memories out."""

    def __init__(
        self,
        store_dir: str,
        shards: int,
        summarizer: str,
        options: dict[str, Any] | None = None,
        chunk_turns: int = 4,
        ttl_s: float | None = None,
        summarize: bool = True,
        scopes: ScopePolicy | None = None,
    ) -> None:
        self.store = open_backend(store_dir, shards)
        # --no-summarize: raw chunks only, and no summarizer is built (no weights loaded).
        self.summarize = summarize
        self.summarizer = get_summarizer(summarizer, **(options or {})) if summarize else None
        self.chunk_turns = chunk_turns
        self.ttl_s = ttl_s
        self.scopes = scopes

    def __call__(self, batch: pa.Table) -> pa.Table:
        busy = Busy()
        items, stats, _ = unpack(batch)
        done, bad = distill_sessions(
            items,
            self.summarizer,
            chunk_turns=self.chunk_turns,
            ttl_s=self.ttl_s,
            summarize=self.summarize,
            scopes=self.scopes,
        )
        if bad:
            self.store.quarantine(bad)
        return pack(
            [lighten(i) for i in done],
            [
                *stats,
                {
                    "quarantined": len(bad),
                    **busy.tally("distill"),
                    "summarizer": getattr(self.summarizer, "name", None),
                    **actor_tally("distill", len(items)),
                },
            ],
        )
