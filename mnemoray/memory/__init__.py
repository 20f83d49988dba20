"""Long-term memory: sessions distilled into records, kept in a store, recalled by meaning.

    from mnemoray.memory import MemoryService, RecallFilters

    service = MemoryService.open("STORE")
    service.add_session(session)
    for hit in service.recall("my-app", "user-1", "where do I live?", k=5):
        print(hit.score, hit.memory.text)

Inside: ``records/`` (what a memory is), ``store/`` (where memories are kept: the
protocol, the Parquet and LanceDB stores, the entity graph's files, store operations),
``recall/`` (ranking), ``service/`` (the one service every edge calls), ``ingest/`` (the
durable queue of sessions to distill), ``hygiene/`` (usage, limits, consolidation).
The face is lazy: importing a light module of the package loads nothing else.
"""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "MemoryService": "mnemoray.memory.service.service",
    "Memory": "mnemoray.memory.records.record",
    "RecallFilters": "mnemoray.memory.records.filters",
    "RecallResult": "mnemoray.memory.recall.result",
    "RetrievalConfig": "mnemoray.memory.recall.config",
    "open_backend": "mnemoray.memory.store.protocol",
    "MemoryBackend": "mnemoray.memory.store.protocol",
    "MemoryStore": "mnemoray.memory.store.parquet.store",
    "distill_session": "mnemoray.memory.records.distill",
    "MemoryOps": "mnemoray.memory.service.json_ops",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
