"""Forgetting in the Parquet store, a part of
:class:`~mnemoray.memory.store.parquet.store.MemoryStore` (``StoreForget``):
tombstones that hide memories for good, and the graph's forget, in one manifest."""

from __future__ import annotations

import time
from collections.abc import Iterable

from mnemoray.files import atomic_write_bytes
from mnemoray.memory.store.graph.commit import forget_in_graph
from mnemoray.memory.store.graph.parts import drop_unlisted
from mnemoray.memory.store.layout import TOMBSTONES_DIR, new_name
from mnemoray.memory.store.manifest import write_manifest
from mnemoray.memory.store.parquet.state import StoreState
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.tombstones import Tombstone, tombstone_lines
from mnemoray.memory.store.writes import OwnedId, forget_targets


class StoreForget:
    """``forget`` (a part of ``MemoryStore``)."""

    def __init__(self, state: StoreState) -> None:
        self._state = state

    # -- forgetting ---------------------------------------------------------
    def forget(
        self,
        memory_ids: Iterable[str] = (),
        session: tuple[str, str, str] | None = None,
        user: tuple[str, str] | None = None,
        *,
        owner: tuple[str, str] | None = None,
        owned: Iterable[OwnedId] = (),
        reason: str = "",
        actor: str = "",
    ) -> int:
        """Hide memories for good (survives reloads); returns how many were hidden.

        A memory id is unique per (app, user) only, so ids come with their owner:
        ``memory_ids`` of ``owner``, or ``owned`` (app, user, memory_id) triples.
        Each tombstone names its owner and never hides another user's memory that
        carries the same id. ``reason`` / ``actor``: kept on each tombstone.
        """
        why = {"reason": reason, "actor": actor}
        targets = forget_targets(memory_ids, session, user, owner, owned, reason, actor)
        with self._state.locked():
            m = self._state.manifest()
            snap = self._state.snapshot(m)
            version, now = m.version + 1, time.time()
            new: list[Tombstone] = []
            for app_name, user_id, memory_id in targets:
                mem = snap.get(memory_id, (app_name, user_id))
                if mem is not None:
                    new.append(
                        Tombstone(
                            "memory",
                            version,
                            now,
                            memory_id=memory_id,
                            app_name=mem.app_name,
                            user_id=mem.user_id,
                            session_id=mem.session_id,
                            **why,
                        )
                    )
            if session is not None:
                new.append(
                    Tombstone(
                        "session",
                        version,
                        now,
                        app_name=session[0],
                        user_id=session[1],
                        session_id=session[2],
                        **why,
                    )
                )
            if user is not None:
                new.append(
                    Tombstone("user", version, now, app_name=user[0], user_id=user[1], **why)
                )
            # Count over the owners touched only: a damaged shard elsewhere must not block it.
            after = StoreSnapshot(m, snap.segments, snap.tombstones + new)
            owners = {(t.app_name, t.user_id) for t in new}
            hidden = sum(snap.count(a, u, now=now) - after.count(a, u, now=now) for a, u in owners)
            # The graph forgets in the same manifest: what the session alone supports,
            # the user's graph, the relations of forgotten memories.
            parts_before = [list(parts) for parts in m.graph]
            graph_changed = forget_in_graph(
                self._state.root, m, targets, session, user, self._state.graph_read
            )
            if hidden == 0 and not graph_changed:
                return 0
            if hidden:
                name = f"{new_name('tomb')}.jsonl"
                atomic_write_bytes(self._state.root / TOMBSTONES_DIR / name, tombstone_lines(new))
                m.tombstones.append(name)
                m.tombstone_count += len(new)
            m.version = version
            write_manifest(self._state.root, m)
            drop_unlisted(self._state.root, parts_before, m)
            return hidden
