"""The memory service every edge (CLI, HTTP, MCP, ADK, tools) calls: sessions in,
recall out, forget and correct, lifecycle hooks; its JSON operations."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "BatchRecall": "mnemoray.memory.service.batch_recall",
    "MemoryEvent": "mnemoray.memory.service.hooks",
    "MemoryHooks": "mnemoray.memory.service.hooks",
    "MemoryOps": "mnemoray.memory.service.json_ops",
    "MemoryService": "mnemoray.memory.service.service",
    "Webhook": "mnemoray.memory.service.webhook",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
