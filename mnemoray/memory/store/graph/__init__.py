"""The entity graph inside a memory store: per-shard Parquet tables the manifest lists,
merged under the store's commit.

    from mnemoray.memory.store.graph import GraphStore

    graph = GraphStore(root, shards).load(app, user)
"""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "GraphStore": "mnemoray.memory.store.graph.tables",
    "graph_from_tables": "mnemoray.memory.store.graph.tables",
    "shard_tables": "mnemoray.memory.store.graph.tables",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
