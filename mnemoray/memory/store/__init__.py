"""Where memories are kept: the store protocol every backend implements and
``open_backend``; ``parquet/`` (Parquet + FAISS segments committed by one manifest),
``lance/`` (LanceDB), ``graph/`` (the entity graph"s files), ``ops/`` (doctor, rebuild,
merge, transfer, stats); the shared format: layout, manifest, segment, snapshot, writes."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "Manifest": "mnemoray.memory.store.manifest",
    "MemoryBackend": "mnemoray.memory.store.protocol",
    "ScopePolicy": "mnemoray.memory.store.scopes",
    "SnapshotReloader": "mnemoray.memory.store.reload",
    "StoreSnapshot": "mnemoray.memory.store.snapshot",
    "WriteResult": "mnemoray.memory.store.writes",
    "open_backend": "mnemoray.memory.store.protocol",
    "parse_location": "mnemoray.memory.store.protocol",
    "read_manifest": "mnemoray.memory.store.manifest",
    "read_run_reports": "mnemoray.memory.store.runs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
