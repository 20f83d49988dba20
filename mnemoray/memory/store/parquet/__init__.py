"""The Parquet + FAISS store: sharded immutable segments committed by one manifest."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "MemoryStore": "mnemoray.memory.store.parquet.store",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
