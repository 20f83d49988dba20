"""Traversal: an in-memory adjacency index (CSR over numpy arrays) of a graph's relations.

    index = GraphIndex.from_relations(graph.relations.values())
    near = index.neighbours("ent-...", depth=2, types={"lives_in", "mentions"}, at=ts)
    near.items()   # [(node id, depth, relation type, relation id), ...] nearest first

Every relation is an edge both ways (``direction`` picks), so "the memories that
mention Melanie" and "what Melanie's memories mention" are one walk. A hop expands
the whole frontier at once with array operations: the cost follows the number of
edges touched, not Python loops over them. Filters: relation types, and world time
(``at``: only relations valid then; structural relations carry no validity and
always pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import sparse

from mnemoray.errors import InvalidInput
from mnemoray.graph.model import Relation

Direction = Literal["both", "out", "in"]
_BACK: dict[str, Direction] = {"out": "in", "in": "out"}  # a walk's reverse direction
MAX_DEPTH = 6


@dataclass(frozen=True)
class _Filter:
    """Which edge positions a walk may take."""

    lut: np.ndarray | None  # relation type code -> allowed
    at: float | None
    direction: Direction

    def ok(self, index: GraphIndex, pos: np.ndarray | slice) -> np.ndarray | None:
        """Allowed mask over ``pos`` (None: every edge is allowed)."""
        mask = None
        if self.lut is not None:
            mask = self.lut[index.etype[pos]]
        if self.at is not None:
            timed = (index.vfrom[pos] <= self.at) & (self.at < index.vto[pos])
            mask = timed if mask is None else mask & timed
        if self.direction != "both":
            out = index.eout[pos] if self.direction == "out" else ~index.eout[pos]
            mask = out if mask is None else mask & out
        return mask


@dataclass(frozen=True)
class Neighbourhood:
    """Nodes reached from the start, nearest first, with the hop count of each; which
    relation reached a node is found when asked (``items``)."""

    index: GraphIndex
    nodes: np.ndarray  # node positions, nearest first
    depths: np.ndarray
    hop: np.ndarray = field(repr=False)  # hop count of every node of the index (-1: not reached)
    walk: _Filter = field(repr=False)

    def __len__(self) -> int:
        return int(self.nodes.size)

    def ids(self) -> list[str]:
        return [self.index.node_ids[i] for i in self.nodes.tolist()]

    def items(self, limit: int | None = None) -> list[tuple[str, int, str, str]]:
        """(node id, depth, relation type, relation id) of the first ``limit`` nodes:
        the relation is one that joins the node to a node one hop nearer."""
        idx = self.index
        nodes = self.nodes[:limit]
        edges = idx.edges_back(nodes, self.hop, self.walk)
        return [
            (idx.node_ids[n], int(d), idx.type_names[idx.etype[e]], idx.relation_ids[idx.erel[e]])
            for n, d, e in zip(
                nodes.tolist(), self.depths[:limit].tolist(), edges.tolist(), strict=True
            )
        ]


class GraphIndex:
    """CSR adjacency: the edges of node ``i`` are positions ``indptr[i]:indptr[i+1]``."""

    def __init__(
        self,
        node_ids: Sequence[str],
        indptr: np.ndarray,
        nbr: np.ndarray,
        etype: np.ndarray,
        vfrom: np.ndarray,
        vto: np.ndarray,
        erel: np.ndarray,
        eout: np.ndarray,
        type_names: Sequence[str],
        relation_ids: Sequence[str],
    ) -> None:
        self.node_ids = list(node_ids)
        self.position = {n: i for i, n in enumerate(self.node_ids)}
        self.indptr, self.nbr, self.etype = indptr, nbr, etype
        self.vfrom, self.vto, self.erel, self.eout = vfrom, vto, erel, eout
        self.type_names = list(type_names)
        self.relation_ids = relation_ids
        self._matrices: dict[tuple[bytes | None, str], Any] = {}
        self._timed = np.flatnonzero(np.isfinite(vfrom) | np.isfinite(vto))

    @property
    def node_count(self) -> int:
        return len(self.node_ids)

    @property
    def relation_count(self) -> int:
        return int(self.nbr.size // 2)

    @classmethod
    def from_relations(cls, relations: Iterable[Relation]) -> GraphIndex:
        rs = list(relations)
        return cls.from_columns(
            [r.src for r in rs],
            [r.dst for r in rs],
            [r.type for r in rs],
            [r.valid_from for r in rs],
            [r.valid_to for r in rs],
            [r.relation_id for r in rs],
        )

    @classmethod
    def from_columns(
        cls,
        src: Sequence[Any],
        dst: Sequence[Any],
        types: Sequence[Any],
        valid_from: Sequence[Any] | None = None,
        valid_to: Sequence[Any] | None = None,
        relation_ids: Sequence[str] | None = None,
    ) -> GraphIndex:
        """Build from parallel columns (lists or arrays; None times: unbounded)."""
        m = len(src)
        ends = np.concatenate([np.asarray(src, dtype=object), np.asarray(dst, dtype=object)])
        node_ids, inv = (
            np.unique(ends.astype(str), return_inverse=True)
            if m
            else (np.array([], dtype=str), np.array([], dtype=np.int64))
        )
        s, d = inv[:m].astype(np.int32), inv[m:].astype(np.int32)
        type_names, tcodes = (
            np.unique(np.asarray(types, dtype=str), return_inverse=True)
            if m
            else (np.array([], dtype=str), np.array([], dtype=np.int64))
        )
        vf = _times(valid_from, m, -np.inf)
        vt = _times(valid_to, m, np.inf)
        heads = np.concatenate([s, d])
        order = np.argsort(heads, kind="stable")
        counts = np.bincount(heads, minlength=len(node_ids))
        # int32 offsets when they fit: the sparse matrix then uses the arrays as they are.
        indptr = np.zeros(len(node_ids) + 1, dtype=np.int32 if 2 * m < 2**31 else np.int64)
        np.cumsum(counts, out=indptr[1:])
        rel = np.arange(m, dtype=np.int32)
        return cls(
            node_ids.tolist(),
            indptr,
            np.concatenate([d, s])[order],
            np.concatenate([tcodes, tcodes]).astype(np.int16)[order],
            np.concatenate([vf, vf])[order],
            np.concatenate([vt, vt])[order],
            np.concatenate([rel, rel])[order],
            np.concatenate([np.ones(m, bool), np.zeros(m, bool)])[order],
            type_names.tolist(),
            list(relation_ids) if relation_ids is not None else [str(i) for i in range(m)],
        )

    def neighbours(
        self,
        start: str | Iterable[str],
        depth: int = 1,
        types: Iterable[str] | None = None,
        at: float | None = None,
        direction: Direction = "both",
    ) -> Neighbourhood:
        """Nodes within ``depth`` hops of ``start`` (ids; unknown ones reach nothing),
        over relations of ``types`` (None: all) valid at world time ``at`` (None: any)."""
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
            raise InvalidInput(
                f"must be an int from 1 to {MAX_DEPTH}, got {depth!r}", field="depth"
            )
        if direction not in ("both", "out", "in"):
            raise InvalidInput(f"must be both, out or in, got {direction!r}", field="direction")
        starts = [start] if isinstance(start, str) else list(start)
        first = np.array([self.position[s] for s in starts if s in self.position], np.int64)
        lut = None
        if types is not None:
            wanted = set(types)
            lut = np.array([t in wanted for t in self.type_names] or [False], dtype=bool)
        walk = _Filter(lut, at, direction)
        hop = np.full(self.node_count, -1, dtype=np.int8)
        hop[first] = 0
        frontier = np.unique(first)
        levels = []
        dense: np.ndarray | None = None  # the allowed-edge matrix, built on first need
        for d in range(1, depth + 1):
            if frontier.size == 0:
                break
            lo, hi = self.indptr[frontier], self.indptr[frontier + 1]
            lens = hi - lo
            total = int(lens.sum())
            if total == 0:
                break
            if total * 8 > self.nbr.size:
                # A frontier holding an eighth of all edges: one sparse matrix-vector
                # product over every edge (in C) beats listing the frontier's edges.
                if dense is None:
                    dense = self._matrix(walk)
                count = dense @ (hop == d - 1).astype(np.float32)
                reached = np.flatnonzero((count > 0) & (hop < 0))
            else:
                pos = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(total)
                pos = pos[hop[self.nbr[pos]] < 0]
                mask = walk.ok(self, pos)
                reached = self.nbr[pos if mask is None else pos[mask]]
            hop[reached] = d
            frontier = np.flatnonzero(hop == d)
            levels.append(frontier)
        nodes = np.concatenate(levels) if levels else np.array([], dtype=np.int64)
        return Neighbourhood(self, nodes, hop[nodes], hop, walk)

    def _matrix(self, walk: _Filter) -> Any:
        """Adjacency as a sparse matrix whose row ``v`` holds v's allowed edges (an edge
        taken toward ``v`` is one stored at the other end, hence the transpose of the
        direction filter). The part that does not depend on ``at`` is cached."""
        back = _Filter(walk.lut, None, _BACK.get(walk.direction, "both"))
        key = (None if back.lut is None else back.lut.tobytes(), back.direction)
        cached = self._matrices.get(key)
        if cached is None:
            mask = back.ok(self, slice(None))
            data = np.ones(self.nbr.size, np.float32) if mask is None else mask.astype(np.float32)
            n = self.node_count
            cached = sparse.csr_matrix((data, self.nbr, self.indptr), shape=(n, n))
            if len(self._matrices) >= 8:  # a few filter combinations recur; keep those
                self._matrices.pop(next(iter(self._matrices)))
            self._matrices[key] = cached
        if walk.at is None:
            return cached
        # Only relations with a validity can fail the time test: look at those alone.
        timed = self._timed
        data = cached.data.copy()
        data[timed] *= (self.vfrom[timed] <= walk.at) & (walk.at < self.vto[timed])
        return sparse.csr_matrix((data, cached.indices, cached.indptr), shape=cached.shape)

    def edges_back(self, nodes: np.ndarray, hop: np.ndarray, walk: _Filter) -> np.ndarray:
        """For each node, an allowed edge position that joins it to a node one hop
        nearer the start (the first in index order)."""
        if nodes.size == 0:
            return np.array([], dtype=np.int64)
        lo, hi = self.indptr[nodes], self.indptr[nodes + 1]
        lens = hi - lo
        pos = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        owner = np.repeat(np.arange(nodes.size), lens)
        keep = hop[self.nbr[pos]] == hop[nodes][owner] - 1
        back = _Filter(walk.lut, walk.at, _BACK.get(walk.direction, "both"))
        mask = back.ok(self, pos)
        if mask is not None:
            keep &= mask
        first = np.full(nodes.size, -1, dtype=np.int64)
        hits = np.flatnonzero(keep)[::-1]  # reversed: the first position per node wins
        first[owner[hits]] = pos[hits]
        return first


def _times(values: Sequence[Any] | None, m: int, missing: float) -> np.ndarray:
    if values is None:
        return np.full(m, missing)
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        out = values.astype(np.float64, copy=True)  # Parquet nulls arrive as NaN
    else:
        out = np.array([missing if v is None else v for v in values], dtype=np.float64)
    out[np.isnan(out)] = missing
    return out
