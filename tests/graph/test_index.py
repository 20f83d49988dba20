"""Traversal over the CSR index: hops, type and time filters, direction, the relation
that reached each node, and the whole-graph (sparse matrix) hop agreeing with a plain
breadth-first walk on a graph with hubs."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest

from mnemoray.errors import InvalidInput
from mnemoray.graph import GraphIndex
from mnemoray.graph.index import _Filter

# m1 -mentions-> mel, m1 -mentions-> paris, mel -lives_in-> berlin [10, 20),
# mel -lives_in-> paris [20, inf), anna -sister_of-> mel, m2 -mentions-> anna
EDGES = [
    ("m1", "mentions", "mel", None, None),
    ("m1", "mentions", "paris", None, None),
    ("mel", "lives_in", "berlin", 10.0, 20.0),
    ("mel", "lives_in", "paris", 20.0, None),
    ("anna", "sister_of", "mel", 5.0, None),
    ("m2", "mentions", "anna", None, None),
]


def index(
    edges: Iterable[tuple[str, str, str, float | None, float | None]] = EDGES,
) -> GraphIndex:
    e = list(edges)
    return GraphIndex.from_columns(
        [x[0] for x in e],
        [x[2] for x in e],
        [x[1] for x in e],
        [x[3] for x in e],
        [x[4] for x in e],
        [f"r{i}" for i in range(len(e))],
    )


def reached(near: object) -> dict[str, int]:
    return {n: d for n, d, _, _ in near.items()}  # type: ignore[attr-defined]


def test_hops() -> None:
    idx = index()
    assert reached(idx.neighbours("mel", depth=1)) == {"m1": 1, "berlin": 1, "paris": 1, "anna": 1}
    two = reached(idx.neighbours("mel", depth=2))
    assert two["m2"] == 2 and "mel" not in two
    assert len(idx.neighbours("nobody", depth=3)) == 0


def test_nearest_first_with_the_relation_that_reached_each_node() -> None:
    near = index().neighbours("m2", depth=3)
    items = near.items()
    assert [d for _, d, _, _ in items] == sorted(d for _, d, _, _ in items)
    assert items[0] == ("anna", 1, "mentions", "r5")
    assert ("mel", 2, "sister_of", "r4") in items
    assert near.items(limit=2) == items[:2]


def test_type_filter() -> None:
    idx = index()
    assert reached(idx.neighbours("mel", depth=2, types=["lives_in"])) == {"berlin": 1, "paris": 1}
    assert reached(idx.neighbours("mel", depth=1, types=["no_such_type"])) == {}


def test_time_filter_keeps_what_held_then_and_every_structural_relation() -> None:
    idx = index()
    at_15 = reached(idx.neighbours("mel", depth=1, at=15.0))
    assert at_15 == {"m1": 1, "berlin": 1, "anna": 1}
    at_25 = reached(idx.neighbours("mel", depth=1, at=25.0))
    assert at_25 == {"m1": 1, "paris": 1, "anna": 1}


def test_direction() -> None:
    idx = index()
    assert reached(idx.neighbours("mel", depth=1, direction="out")) == {"berlin": 1, "paris": 1}
    assert reached(idx.neighbours("mel", depth=1, direction="in")) == {"m1": 1, "anna": 1}


def test_several_starts() -> None:
    assert reached(index().neighbours(["m2", "berlin"], depth=1)) == {"anna": 1, "mel": 1}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"depth": 0}, "depth"),
        ({"depth": 9}, "depth"),
        ({"depth": True}, "depth"),
        ({"direction": "up"}, "direction"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        index().neighbours("mel", **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def _bfs(idx: GraphIndex, start: str, depth: int, walk: _Filter) -> dict[int, int]:
    hop = {idx.position[start]: 0}
    frontier = [idx.position[start]]
    for d in range(1, depth + 1):
        nxt = []
        for u in frontier:
            for p in range(idx.indptr[u], idx.indptr[u + 1]):
                ok = walk.ok(idx, np.array([p]))
                v = int(idx.nbr[p])
                if (ok is None or ok[0]) and v not in hop:
                    hop[v] = d
                    nxt.append(v)
        frontier = nxt
    return {k: v for k, v in hop.items() if v > 0}


def test_whole_graph_hops_agree_with_a_plain_walk() -> None:
    rng = np.random.default_rng(3)
    n = 400
    weights = 1.0 / np.arange(1, n + 1) ** 1.2  # a few hubs: their hops take the matrix path
    weights /= weights.sum()
    m = 1500
    src, dst = rng.choice(n, m, p=weights), rng.choice(n, m, p=weights)
    types = np.array(["mentions", "lives_in", "owns"])[rng.integers(0, 3, m)]
    start = rng.random(m) * 100
    end = np.where(rng.random(m) < 0.5, start + 20, np.nan)
    ids = [f"r{i}" for i in range(m)]
    idx = GraphIndex.from_columns(
        [f"n{i}" for i in src], [f"n{i}" for i in dst], types, start, end, ids
    )
    ends = {f"r{i}": {f"n{a}", f"n{b}"} for i, (a, b) in enumerate(zip(src, dst, strict=True))}
    hub = idx.position["n0"]
    assert (idx.indptr[hub + 1] - idx.indptr[hub]) * 8 > idx.nbr.size  # the matrix path runs
    lut = np.array([t in ("mentions", "owns") for t in idx.type_names])
    for s in ("n0", "n1", "n7", "n150"):
        for walk in (
            _Filter(None, None, "both"),
            _Filter(lut, None, "both"),
            _Filter(None, 50.0, "both"),
            _Filter(None, None, "out"),
            _Filter(lut, 30.0, "in"),
        ):
            near = idx.neighbours(
                s,
                depth=3,
                types=None if walk.lut is None else ["mentions", "owns"],
                at=walk.at,
                direction=walk.direction,
            )
            assert dict(zip(near.nodes.tolist(), near.depths.tolist(), strict=True)) == _bfs(
                idx, s, 3, walk
            )
            depth_of = dict(zip(near.ids(), near.depths.tolist(), strict=True)) | {s: 0}
            for node, d, _, rid in near.items():  # the relation joins a node one hop nearer
                (other,) = ends[rid] - {node}
                assert depth_of[other] == d - 1


def test_from_relations_matches_from_columns() -> None:
    from mnemoray.graph.model import Relation

    rels = [
        Relation(f"r{i}", "app", "u", s, "entity", t, d, "entity", valid_from=vf, valid_to=vt)
        for i, (s, t, d, vf, vt) in enumerate(EDGES)
    ]
    a, b = GraphIndex.from_relations(rels), index()
    assert reached(a.neighbours("mel", depth=2, at=15.0)) == reached(
        b.neighbours("mel", depth=2, at=15.0)
    )
