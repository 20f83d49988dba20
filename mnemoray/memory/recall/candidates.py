"""Candidate sets: one scope's records as aligned arrays, with the keyword and entity
indexes built once per set and the records materialized on demand."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
from scipy import sparse

from mnemoray.graph import UserGraph
from mnemoray.graph.recall import GraphRecall
from mnemoray.memory.recall.axes import TimeFacts, time_facts
from mnemoray.memory.recall.bm25 import BM25, column_sums
from mnemoray.memory.recall.keywords import KeywordTokenizer
from mnemoray.memory.recall.record_times import (
    SetSlots,
    recent_time_facts,
    resolve_all_later,
    set_slots,
)
from mnemoray.memory.recall.speakers import user_shares
from mnemoray.memory.records.filters import RetrievalError, event_times
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.index import _slice_scores
from mnemoray.memory.store.rows import rows_to_memories
from mnemoray.memory.store.segment import LoadedSegment
from mnemoray.memory.store.snapshot import StoreSnapshot

_Index = TypeVar("_Index", BM25, "EntityIndex")
# A set of up to this many records (one user's, as a rule) resolves the time its records'
# words name all at once, in the background from its first recall with a time intent: one
# to three times what building its BM25 index costs, once (benchmarks/README.md, "Time
# axis"), where resolving the records each recall looks at (a few hundred, mostly new to
# the set) costs every recall more than the rest of the ranking. A larger set (an app's
# records, keyword recall) resolves only the records its recalls look at.
RESOLVE_ALL_ROWS = 50_000


# -- keyword indexes over a candidate set ------------------------------------
class EntityIndex:
    """Query-term overlap with each record's entities, as one sparse column sum.

    Cell (record, term) = sum over the record's entities containing the term
    of 1 / (terms in that entity): naming "African Grey" in full scores 1,
    naming "grey" alone 0.5.
    """

    def __init__(
        self, entities: Sequence[Sequence[str]], tokenizer: KeywordTokenizer | None = None
    ) -> None:
        self.tokenizer = tokenizer or KeywordTokenizer()
        self.tokenizer_version = self.tokenizer.version
        vocab: dict[str, int] = {}
        languages: set[str] = set()
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for i, names in enumerate(entities):
            cells: dict[int, float] = {}
            for name in names:
                found, language = self.tokenizer.analyze(name)
                languages.add(language)
                toks = set(found)
                for tok in toks:
                    j = vocab.setdefault(tok, len(vocab))
                    cells[j] = cells.get(j, 0.0) + 1.0 / len(toks)
            rows.extend([i] * len(cells))
            cols.extend(cells)
            vals.extend(cells.values())
        self.vocab = vocab
        self.languages = frozenset(languages)
        self.size = len(entities)
        self._matrix = sparse.csc_matrix(
            (np.asarray(vals, dtype=np.float32), (rows, cols)),
            shape=(self.size, len(vocab)),
            dtype=np.float32,
        )

    def scores(self, query: str) -> np.ndarray:
        terms = self.tokenizer.query_terms(query, self.languages)
        ids = sorted({self.vocab[t] for t in terms if t in self.vocab})
        if not ids or not self.size:
            return np.zeros(self.size, dtype=np.float32)
        return column_sums(self._matrix, ids)


# -- candidate sets ------------------------------------------------------------
_COLUMNS = [
    "memory_id",
    "app_name",
    "session_id",
    "kind",
    "key_text",
    "entities",
    "event_time_start",
    "event_time_end",
    "created_at",
    "expires_at",
    "agent_name",
    "source_event_ids",
    "user_id",
]


@dataclass
class _Part:
    seg: LoadedSegment
    start: int
    end: int
    local: np.ndarray | None  # live rows relative to start; None = the whole span


class Candidates:
    """Aligned arrays over one scope's records, plus lazily built keyword indexes.

    Built once per (scope, snapshot contents) and reused by every query:
    nothing here depends on the query or the clock.
    """

    def __init__(
        self,
        table: pa.Table,
        parts: list[_Part] | None = None,
        memories: list[Memory] | None = None,
        dense: np.ndarray | None = None,
    ) -> None:
        self.parts = parts or []
        self._memories = memories  # a transient set (app ANN candidates)
        self._built: dict[int, Memory] = {}  # position -> record, materialized on demand
        self._dense = dense
        self.size = table.num_rows
        self.memory_ids = table["memory_id"].to_pylist()
        self.session_ids = table["session_id"].to_numpy(zero_copy_only=False)
        self.kinds = table["kind"].to_numpy(zero_copy_only=False)
        # Scope columns (mnemoray.memory.store.scopes): owner app, and agent ("" = shared).
        self.app_names = table["app_name"].to_numpy(zero_copy_only=False)
        self.agent_names = table["agent_name"].fill_null("").to_numpy(zero_copy_only=False)
        self.t_start, self.t_end = event_times(table)
        self.expires = table["expires_at"].to_numpy(zero_copy_only=False).astype(np.float64)
        self._table = table
        self._bm25: BM25 | None = None
        self._entities: EntityIndex | None = None
        self._time_facts: dict[int, TimeFacts] = {}  # a transient set's: position -> facts
        self._time_slots: SetSlots | None = None  # a stored set's (record_times)
        self._times_done: threading.Event | None = None  # set: every record resolved
        self._graph: GraphRecall | None = None
        self._user_shares: np.ndarray | None = None
        self._chunks_by_event: dict[tuple[str, str, str, str], list[int]] | None = None
        self._lock = threading.Lock()
        self.built_at = time.time()

    # keyword indexes, built on first use ------------------------------------
    # Each is rebuilt when asked for with another tokenizer (version or language):
    # an index is never queried with terms of a tokenizer other than its own.
    def bm25(self, tokenizer: KeywordTokenizer | None = None) -> BM25:
        return self._keyword_index(
            "_bm25", tokenizer, lambda t: BM25(self._table["key_text"].to_pylist(), tokenizer=t)
        )

    def entity_index(self, tokenizer: KeywordTokenizer | None = None) -> EntityIndex:
        return self._keyword_index(
            "_entities",
            tokenizer,
            lambda t: EntityIndex([e or () for e in self._table["entities"].to_pylist()], t),
        )

    def _keyword_index(
        self,
        attr: str,
        tokenizer: KeywordTokenizer | None,
        build: Callable[[KeywordTokenizer], _Index],
    ) -> _Index:
        """The index kept in ``attr``, built once per tokenizer version (locked: two
        queries on a new set build it once)."""
        tokenizer = tokenizer or KeywordTokenizer()
        index = getattr(self, attr)
        if index is None or index.tokenizer_version != tokenizer.version:
            with self._lock:
                index = getattr(self, attr)
                if index is None or index.tokenizer_version != tokenizer.version:
                    index = build(tokenizer)
                    setattr(self, attr, index)
        return index

    def graph_recall(self, graph: UserGraph) -> GraphRecall:
        """The user's graph laid over this set (built once per graph object: a snapshot
        keeps one per user, so this lives as long as both do)."""
        found = self._graph
        if found is None or found.graph is not graph:
            found = self._graph = GraphRecall(graph, self.memory_ids, self.session_ids)
        return found

    def user_shares(self) -> np.ndarray:
        """Per record, the share of its words the user said (:mod:`.speakers`), read
        once per set."""
        found = self._user_shares
        if found is None:
            texts = (
                [m.key_text or m.text for m in self._memories]
                if self._memories is not None
                else self._table["key_text"].to_pylist()
            )
            found = self._user_shares = user_shares(list(self.kinds), texts)
        return found

    def chunks_holding(self, pos: int) -> list[int]:
        """The chunks of record ``pos``'s session that hold one of its source events (the
        turn a fact came from), by position; the index is built once per set."""
        index = self._chunks_by_event
        users = self._table["user_id"]
        if index is None:
            index = {}
            sources = self._table["source_event_ids"].to_pylist()
            owners = users.to_pylist()
            for p, (kind, ids) in enumerate(zip(self.kinds, sources, strict=True)):
                if kind == "chunk":
                    session = (self.app_names[p], owners[p], self.session_ids[p])
                    for eid in ids or ():
                        index.setdefault((*session, eid), []).append(p)
            self._chunks_by_event = index
        ids = self._table["source_event_ids"][pos].as_py() or ()
        session = (self.app_names[pos], users[pos].as_py(), self.session_ids[pos])
        return list(dict.fromkeys(p for eid in ids for p in index.get((*session, eid), ())))

    def key_text(self, pos: int) -> str:
        return self._table["key_text"][pos].as_py() or ""

    def time_facts(self, pos: int) -> TimeFacts:
        """What record ``pos`` says of time, resolved once per record. A set of stored
        records keeps the answers with their segments (mnemoray.memory.recall.record_times) and,
        when no larger than :data:`RESOLVE_ALL_ROWS`, resolves every record it holds in
        the background from the first ask (that recall resolves what it asks inline):
        its later recalls then read no words at all, whichever records they look at. A
        transient set (app-wide candidates) resolves what is asked."""
        if not self.parts:
            found = self._time_facts.get(pos)
            if found is None:
                found = self._time_facts[pos] = recent_time_facts(
                    self.key_text(pos), float(self.t_start[pos])
                )
            return found
        slots, rows = self._time_slots or self._open_time_slots()
        found = slots[pos][rows[pos]]
        if found is None:
            found = slots[pos][rows[pos]] = time_facts(self.key_text(pos), float(self.t_start[pos]))
        return found

    def times_resolved(self, timeout: float | None = None) -> bool:
        """Wait until the background pass has resolved every record (a set no larger
        than RESOLVE_ALL_ROWS, once asked); False if it has not within ``timeout``."""
        done = self._times_done
        return done is None or done.wait(timeout)

    def _open_time_slots(self) -> SetSlots:
        """Built once, locked: two queries on a new set resolve its records once."""
        with self._lock:
            if self._time_slots is None:
                found = set_slots((p.seg, p.start, p.end, p.local) for p in self.parts)
                if self.size <= RESOLVE_ALL_ROWS:
                    self._times_done = resolve_all_later(
                        found, self._table["key_text"], self.t_start
                    )
                self._time_slots = found
            return self._time_slots

    # query-time arrays ----------------------------------------------------------
    def live(self, now: float) -> np.ndarray:
        return ~(self.expires <= now)  # NaN (no TTL) compares False

    def dense(self, query_vec: np.ndarray | None) -> np.ndarray | None:
        if self._dense is not None:
            return self._dense
        if query_vec is None or not self.parts or self.parts[0].seg.vectors is None:
            return None
        q = np.ascontiguousarray(query_vec, dtype=np.float32).reshape(1, -1)
        chunks = []
        for p in self.parts:
            assert p.seg.vectors is not None
            if q.shape[1] != p.seg.vectors.shape[1]:
                raise RetrievalError(
                    f"expected dimension {p.seg.vectors.shape[1]}, got {q.shape[1]}",
                    field="query_vec",
                )
            s = _slice_scores(p.seg.vectors, q, p.start, p.end)[0]
            chunks.append(s if p.local is None else s[p.local])
        return np.concatenate(chunks).astype(np.float64) if chunks else np.zeros(0)

    def memories(self, positions: Sequence[int]) -> list[Memory]:
        if self._memories is not None:
            return [self._memories[i] for i in positions]
        # Records are immutable and this set lives as long as its snapshot's contents: a
        # record built once answers every later query of the scope from this dict.
        done = self._built
        missing = [p for p in positions if p not in done]
        if missing:
            done.update(self._build(missing))
        return [done[p] for p in positions]

    def _build(self, positions: Sequence[int]) -> dict[int, Memory]:
        # Map positions back to segment rows; one Arrow take per segment.
        offsets = np.cumsum(
            [0] + [len(p.local) if p.local is not None else p.end - p.start for p in self.parts]
        )
        by_part: dict[int, list[tuple[int, int]]] = {}
        for pos in positions:
            j = int(np.searchsorted(offsets, pos, side="right") - 1)
            p = self.parts[j]
            off = pos - offsets[j]
            row = p.start + (int(p.local[off]) if p.local is not None else int(off))
            by_part.setdefault(j, []).append((pos, row))
        found: dict[int, Memory] = {}
        for j, items in by_part.items():
            seg = self.parts[j].seg
            mems = rows_to_memories(seg.table, [r for _, r in items], seg.vectors)
            found.update((pos, m) for (pos, _), m in zip(items, mems, strict=True))
        return found

    # -- building --------------------------------------------------------------
    @classmethod
    def from_spans(
        cls, snap: StoreSnapshot, spans: Iterable[tuple[LoadedSegment, tuple[int, int]]]
    ) -> Candidates:
        """Every row of the spans that no tombstone of ``snap`` hides."""
        parts: list[_Part] = []
        tables: list[pa.Table] = []
        for seg, (start, end) in spans:
            dead = snap.forgotten(seg)
            local = (
                None
                if dead is None or not dead[start:end].any()
                else np.flatnonzero(~dead[start:end])
            )
            if local is not None and not len(local):
                continue
            sliced = seg.table.select(_COLUMNS).slice(start, end - start)
            tables.append(sliced if local is None else sliced.take(local))
            parts.append(_Part(seg, start, end, local))
        table = pa.concat_tables(tables) if tables else _empty_table()
        return cls(table, parts=parts)

    @classmethod
    def from_memories(cls, memories: list[Memory], dense: np.ndarray | None) -> Candidates:
        table = pa.table(
            {
                "memory_id": [m.memory_id for m in memories],
                "app_name": pa.array([m.app_name for m in memories], pa.string()),
                "agent_name": pa.array([m.agent_name for m in memories], pa.string()),
                "session_id": [m.session_id for m in memories],
                "user_id": pa.array([m.user_id for m in memories], pa.string()),
                "kind": [m.kind for m in memories],
                "key_text": [m.key_text for m in memories],
                "entities": pa.array([list(m.entities) for m in memories], pa.list_(pa.string())),
                "source_event_ids": pa.array(
                    [list(m.source_event_ids) for m in memories], pa.list_(pa.string())
                ),
                **{
                    name: pa.array([getattr(m, name) for m in memories], pa.float64())
                    for name in ("event_time_start", "event_time_end", "created_at", "expires_at")
                },
            }
        )
        return cls(table, memories=memories, dense=dense)


def _empty_table() -> pa.Table:
    return pa.table(
        {
            "memory_id": pa.array([], pa.string()),
            "app_name": pa.array([], pa.string()),
            "agent_name": pa.array([], pa.string()),
            "session_id": pa.array([], pa.string()),
            "user_id": pa.array([], pa.string()),
            "kind": pa.array([], pa.string()),
            "key_text": pa.array([], pa.string()),
            "entities": pa.array([], pa.list_(pa.string())),
            "source_event_ids": pa.array([], pa.list_(pa.string())),
            **{
                n: pa.array([], pa.float64())
                for n in ("event_time_start", "event_time_end", "created_at", "expires_at")
            },
        }
    )
