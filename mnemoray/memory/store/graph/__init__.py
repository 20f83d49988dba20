"""The entity graph inside a memory store: per-shard Parquet tables the manifest lists,
merged under the store's commit.

    from mnemoray.memory.store.graph import GraphStore

    graph = GraphStore(root, shards).load(app, user)
"""

from mnemoray.memory.store.graph.tables import GraphStore, graph_from_tables, shard_tables

__all__ = ["GraphStore", "graph_from_tables", "shard_tables"]
