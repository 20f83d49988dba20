"""Recall for a file of queries: each line checked on its own, the queries of a batch
embedded in one encoder call, ranked on a thread pool, answered in input order.

One JSON object per line in, one per line out (``qid`` echoed; a bad line answers
``{"qid", "line", "error"}`` and the others go on). Answers stream batch by batch, so a
large file neither waits for its end nor holds it in memory. ``took_ms`` of an answer
is its ranking time plus its share of the batch's encode time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any, cast

import numpy as np

from mnemoray.errors import ConfigError
from mnemoray.memory.recall.config import RetrievalConfig
from mnemoray.memory.recall.modes import Mode
from mnemoray.memory.recall.request import RecallRequest
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.snapshot import StoreSnapshot

FIELDS = frozenset({"qid", "app_name", "user_id", "query", "top_k", "filters"})
DEFAULT_BATCH = 256


# (app_name, user_id, query, top_k, filters) -> the line's resolved recall
Resolve = Callable[[str, str, str, int, Any], RecallRequest]


@dataclass(frozen=True)
class QueryLine:
    """One checked line of a query file: its recall, resolved."""

    lineno: int
    qid: Any
    request: RecallRequest


def parse_line(lineno: int, line: bytes | str, default_top_k: int, resolve: Resolve) -> QueryLine:
    """The line's query; ValueError (an InvalidInput is one) naming what is wrong."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    unknown = set(raw) - FIELDS
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown field")
    for name in ("app_name", "user_id", "query"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise ValueError(f"{name}: missing or not a non-empty string")
    top_k = raw.get("top_k")
    top_k = default_top_k if top_k is None else top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k: must be a positive integer, got {top_k!r}")
    request = resolve(raw["app_name"], raw["user_id"], raw["query"], top_k, raw.get("filters"))
    return QueryLine(lineno, raw.get("qid"), request)


def _qid_of(line: bytes | str) -> Any:
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    return raw.get("qid") if isinstance(raw, dict) else None


class BatchRecall:
    """Answers query lines over one service (see the module docstring)."""

    def __init__(
        self,
        service: MemoryService,
        *,
        default_top_k: int = 5,
        mode: str | None = None,
        batch_size: int = DEFAULT_BATCH,
        workers: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"must be >= 1, got {batch_size}", field="batch_size")
        if workers < 1:
            raise ConfigError(f"must be >= 1, got {workers}", field="workers")
        self.service = service
        self.default_top_k = default_top_k
        # One mode for every line, checked now as a config's own mode is (a bad one fails
        # the run, not each line).
        self.mode = None if mode is None else RetrievalConfig(mode=cast(Mode, mode)).mode
        self.batch_size = batch_size
        self.workers = workers
        self.failed = 0  # lines answered with an error so far

    def answers(self, lines: Iterable[bytes | str]) -> Iterator[dict[str, Any]]:
        """One answer per non-blank line, in input order."""
        numbered = ((n, line) for n, line in enumerate(lines, start=1) if line.strip())
        with ThreadPoolExecutor(self.workers, thread_name_prefix="mnemoray-recall") as pool:
            while chunk := list(islice(numbered, self.batch_size)):
                yield from self._batch(chunk, pool)

    def _batch(
        self, chunk: list[tuple[int, bytes | str]], pool: ThreadPoolExecutor
    ) -> list[dict[str, Any]]:
        parsed: list[QueryLine | dict[str, Any]] = []
        for lineno, line in chunk:
            try:
                parsed.append(parse_line(lineno, line, self.default_top_k, self._resolve))
            except (ValueError, TypeError) as exc:
                parsed.append({"qid": _qid_of(line), "line": lineno, "error": str(exc)})
        good = [q for q in parsed if isinstance(q, QueryLine)]
        snap = self.service.snapshot()  # one version for the whole batch
        start = time.perf_counter()
        vectors = self._vectors(good, snap)
        encode_ms = (time.perf_counter() - start) * 1000 / max(1, len(good))
        ranked = pool.map(lambda q: self._rank(q, vectors.get(q.lineno), snap, encode_ms), good)
        answers = dict(zip((q.lineno for q in good), ranked, strict=True))
        out = []
        for item in parsed:
            answer = answers[item.lineno] if isinstance(item, QueryLine) else item
            self.failed += "error" in answer
            out.append(answer)
        return out

    def _resolve(
        self, app_name: str, user_id: str, query: str, top_k: int, filters: Any
    ) -> RecallRequest:
        return self.service.resolve(app_name, user_id, query, top_k, filters, self.mode)

    def _vectors(self, lines: list[QueryLine], snap: StoreSnapshot) -> dict[int, np.ndarray]:
        need = [q for q in lines if self.service.needs_vector(q.request, snap)]
        if not need:
            return {}
        embedder = self.service.embedder
        if embedder is None:
            raise ConfigError("this service has no query embedder", field="embedder")
        # The service's query cache first (repeated queries); the rest in one call.
        cache = self.service.query_cache
        found = {text: cache.get(text) for text in {q.request.query for q in need}}
        vectors = {text: vec for text, vec in found.items() if vec is not None}
        missing = [text for text, vec in found.items() if vec is None]
        for text, vec in zip(missing, embedder.encode(missing), strict=True):
            vectors[text] = cache.put(text, vec)
        return {q.lineno: vectors[q.request.query] for q in need}

    def _rank(
        self, q: QueryLine, vec: np.ndarray | None, snap: StoreSnapshot, encode_ms: float
    ) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            results = self.service.recall(q.request, query_vec=vec, snap=snap)
        except (ValueError, TypeError) as exc:
            return {"qid": q.qid, "line": q.lineno, "error": str(exc)}
        took = (time.perf_counter() - start) * 1000 + (encode_ms if vec is not None else 0.0)
        return {"qid": q.qid, "memories": [r.to_dict() for r in results], "took_ms": round(took, 3)}
