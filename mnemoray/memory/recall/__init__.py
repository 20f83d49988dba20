"""Recall: candidates of a scope, their signals (dense, BM25, entity, graph, time,
recency) and one fusion that ranks them."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "Candidates": "mnemoray.memory.recall.candidates",
    "MODES": "mnemoray.memory.recall.modes",
    "Mode": "mnemoray.memory.recall.modes",
    "QueryVectorCache": "mnemoray.memory.recall.query_cache",
    "RecallResult": "mnemoray.memory.recall.result",
    "RetrievalConfig": "mnemoray.memory.recall.config",
    "Retriever": "mnemoray.memory.recall.retriever",
    "check_mode": "mnemoray.memory.recall.config",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
