"""The in-process engine: batches of ``commit_every`` archive rows, each step in turn."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice

from mnemoray.archive import iter_archive
from mnemoray.backfill.commit import Chunk, make_chunk
from mnemoray.backfill.config import BackfillConfig, flag_of
from mnemoray.backfill.report import count_ledger_hits
from mnemoray.backfill.steps import distill_sessions, embed_sessions, skip_processed, validate_rows
from mnemoray.embedders import Embedder, open_embedder, write_model
from mnemoray.errors import InvalidInput
from mnemoray.memory.backend import MemoryBackend
from mnemoray.summarizers import Summarizer, get_summarizer


class InProcessEngine:
    """Every step in this process, one batch at a time; no Ray."""

    name = "in_process"

    def check(self, config: BackfillConfig) -> None:
        given = config.ray.given() if config.ray is not None else {}
        if given:
            name = next(iter(given))
            raise InvalidInput(f"the in-process engine cannot honour {flag_of(name)} (a Ray "
                               f"Data option); drop it or run on Ray Data", field=f"ray.{name}")

    def open(self, config: BackfillConfig, store: MemoryBackend) -> Iterator[Chunk]:
        summarizer: Summarizer | None = None  # --no-summarize: none is built
        if config.summarize:
            summarizer = (get_summarizer(config.summarizer, **config.summarizer_options)
                          if isinstance(config.summarizer, str) else config.summarizer)
        embedder = open_embedder(config.embedder, store, "batch")
        return self._chunks(config, store, summarizer, embedder)

    def _chunks(self, config: BackfillConfig, store: MemoryBackend, summarizer: Summarizer | None,
                embedder: Embedder | None) -> Iterator[Chunk]:
        rows = iter(iter_archive(config.archive))
        name = getattr(summarizer, "name", None)
        while True:
            t0 = time.perf_counter()
            batch = list(islice(rows, config.commit_every))
            if not batch:
                return
            t1 = time.perf_counter()
            items, bad = validate_rows(batch)
            todo, skipped = skip_processed(store, items)
            t2 = time.perf_counter()
            distilled, failed = distill_sessions(todo, summarizer, chunk_turns=config.chunk_turns,
                                                 ttl_s=config.ttl_s, summarize=config.summarize,
                                                 scopes=config.scopes)
            bad += failed
            if bad:
                store.quarantine(bad)
            t3 = time.perf_counter()
            embedded = embed_sessions(distilled, embedder)
            t4 = time.perf_counter()
            model, dim = write_model(store, embedder)
            stats = {"read": len(batch), "skipped": skipped,
                     "ledger_hits": count_ledger_hits(items, todo), "quarantined": len(bad),
                     "summarizer": name,
                     "seconds": {"read": t1 - t0, "validate": t2 - t1, "distill": t3 - t2,
                                 "embed": t4 - t3}}
            chunk = make_chunk(store, embedded, model, dim, stats)
            chunk.stats["seconds"]["write"] = time.perf_counter() - t4
            yield chunk


__all__ = ["InProcessEngine"]
