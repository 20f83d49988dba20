"""The in-process engine: batches of ``commit_every`` archive rows, each step in turn."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from mnemoray.backfill.archive import iter_archive
from mnemoray.backfill.busy import Busy, add_busy
from mnemoray.backfill.commit import Chunk, make_chunk
from mnemoray.backfill.config import BackfillConfig, flag_of
from mnemoray.backfill.report import count_ledger_hits
from mnemoray.backfill.steps import distill_sessions, embed_sessions, skip_processed, validate_rows
from mnemoray.embedders import Embedder, open_embedder, write_model
from mnemoray.errors import InvalidInput
from mnemoray.memory.store.protocol import MemoryBackend
from mnemoray.summarizers import Summarizer, get_summarizer


class InProcessEngine:
    """Every step in this process, one batch at a time; no Ray."""

    name = "in_process"

    def check(self, config: BackfillConfig) -> None:
        given = config.ray.given() if config.ray is not None else {}
        if given:
            name = next(iter(given))
            raise InvalidInput(
                f"the in-process engine cannot honour {flag_of(name)} (a Ray "
                f"Data option); drop it or run on Ray Data",
                field=f"ray.{name}",
            )

    def open(self, config: BackfillConfig, store: MemoryBackend) -> Iterator[Chunk]:
        summarizer: Summarizer | None = None  # --no-summarize: none is built
        if config.summarize:
            summarizer = (
                get_summarizer(config.summarizer, **config.summarizer_options)
                if isinstance(config.summarizer, str)
                else config.summarizer
            )
        embedder = open_embedder(config.embedder, store, "batch")
        return self._chunks(config, store, summarizer, embedder)

    def _chunks(
        self,
        config: BackfillConfig,
        store: MemoryBackend,
        summarizer: Summarizer | None,
        embedder: Embedder | None,
    ) -> Iterator[Chunk]:
        rows = iter(iter_archive(config.archive))
        name = getattr(summarizer, "name", None)
        while True:
            stats: dict[str, Any] = {"summarizer": name}
            busy = Busy()
            batch = list(islice(rows, config.commit_every))
            if not batch:
                return
            busy = _next(stats, "read", busy)
            items, bad = validate_rows(batch)
            todo, skipped = skip_processed(store, items)
            busy = _next(stats, "validate", busy)
            distilled, failed = distill_sessions(
                todo,
                summarizer,
                chunk_turns=config.chunk_turns,
                ttl_s=config.ttl_s,
                summarize=config.summarize,
                scopes=config.scopes,
            )
            bad += failed
            if bad:
                store.quarantine(bad)
            busy = _next(stats, "distill", busy)
            embedded = embed_sessions(distilled, embedder)
            busy = _next(stats, "embed", busy)
            model, dim = write_model(store, embedder)
            stats.update(
                {
                    "read": len(batch),
                    "skipped": skipped,
                    "ledger_hits": count_ledger_hits(items, todo),
                    "quarantined": len(bad),
                }
            )
            chunk = make_chunk(store, embedded, model, dim, stats)
            add_busy(chunk.stats, "write", *busy.elapsed())
            yield chunk


def _next(stats: dict[str, Any], stage: str, busy: Busy) -> Busy:
    """Add ``stage``'s seconds to ``stats``; the clock of the stage after it."""
    add_busy(stats, stage, *busy.elapsed())
    return Busy()


__all__ = ["InProcessEngine"]
