"""The ``actors`` entry a Ray Data actor adds to its stage tally: its id, its node and the
sessions it handled (folded by :mod:`mnemoray.backfill.placement`)."""

from __future__ import annotations

from typing import Any

from mnemoray.backfill.placement import ACTORS


def actor_tally(stage: str, sessions: int) -> dict[str, Any]:
    """``{"actors": {"actor@node": {stage, actor, node, sessions}}}`` for the calling actor;
    ``{}``
    when not called in one (a stage run in process, as tests do)."""
    import ray  # the ``ray`` extra: only Ray Data calls the stages that call this

    if not ray.is_initialized():
        return {}
    ctx = ray.get_runtime_context()
    actor = ctx.get_actor_id()
    if actor is None:
        return {}
    node = ctx.get_node_id()
    # Keyed by actor and node: a restarted actor keeps its id on another node.
    return {
        ACTORS: {
            f"{actor}@{node}": {"stage": stage, "actor": actor, "node": node, "sessions": sessions}
        }
    }
