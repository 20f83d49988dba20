"""The entity graph of a user's sessions (docs/graph.md): the model, without storage.

    from mnemoray.graph import UserGraph, extract_session
    from mnemoray.memory.store.graph import GraphStore     # where a store keeps graphs

    store = GraphStore(root, shards)
    graph = store.load(app, user)
    graph.add_session(extract_session(session, memories))    # in time order
    store.save(graph)
    index = store.load_index(app, user)
    index.neighbours(graph.find("Mel").entity_id, depth=2, at=ts).items()

Entities (people, places, organisations, things, dates and periods) are resolved
across a user's sessions with their aliases; relations join entities and memories
(``mentions``, ``same_entity``, ``extends``, ``contradicts``, ``same_period``, and
facts read from text such as ``lives_in``) with strength, confidence, world-time
validity, provenance and a version.
"""

from mnemoray.graph.extract import SessionExtract, extract_session
from mnemoray.graph.graph import UserGraph
from mnemoray.graph.index import GraphIndex, Neighbourhood
from mnemoray.graph.model import (
    FUNCTIONAL,
    RELATION_TYPES,
    STRUCTURAL,
    TYPED,
    Alias,
    Entity,
    Relation,
    Support,
)

__all__ = [
    "FUNCTIONAL",
    "RELATION_TYPES",
    "STRUCTURAL",
    "TYPED",
    "Alias",
    "Entity",
    "GraphIndex",
    "Neighbourhood",
    "Relation",
    "SessionExtract",
    "Support",
    "UserGraph",
    "extract_session",
]
