"""Operations on a whole store: ``doctor`` (check and repair), ``rebuild`` (a lost
manifest), ``merge`` (small segments into one: ``mnemoray compact``), ``transfer``
(export / import as JSON lines), ``stats``."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "compact_store": "mnemoray.memory.store.ops.merge",
    "diagnose": "mnemoray.memory.store.ops.doctor",
    "export_jsonl": "mnemoray.memory.store.ops.transfer",
    "read_export": "mnemoray.memory.store.ops.transfer",
    "repair": "mnemoray.memory.store.ops.doctor",
    "store_stats": "mnemoray.memory.store.ops.stats",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
