"""Where a backfill's actors ran and what each did: the ``actors`` entry of a stage
tally (``mnemoray.pipeline.rows``; a Ray Data actor writes it, ``mnemoray.pipeline.
placement``), folded into the run report's ``actors`` list.

On a cluster this is how a run shows its distill and embed work spread over nodes (and
which node a slow or failed share ran on). In process it is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ACTORS = "actors"


def merge_actors(tallies: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """The ``actors`` entries of ``tallies`` in one: sessions summed per actor and node."""
    out: dict[str, dict[str, Any]] = {}
    for tally in tallies:
        for actor, did in (tally or {}).items():
            mine = out.setdefault(actor, {**did, "sessions": 0})
            mine["sessions"] += int(did.get("sessions", 0))
    return out


def actor_rows(actors: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The report's list: one row per actor (stage, actor, node, sessions), by stage."""
    return sorted(
        (
            {
                "stage": d["stage"],
                "actor": d.get("actor", key),
                "node": d["node"],
                "sessions": d["sessions"],
            }
            for key, d in actors.items()
        ),
        key=lambda r: (r["stage"], r["node"], r["actor"]),
    )
