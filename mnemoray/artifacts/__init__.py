"""Versioned artifacts: large payloads the model sees as a handle and a summary; stores
in memory and on files, a read-only view at one event, and offloading large tool results."""

from typing import Any

from mnemoray.lazy_face import lazy_export

_EXPORTS = {
    "Artifact": "mnemoray.artifacts.store",
    "ArtifactError": "mnemoray.artifacts.store",
    "ArtifactNotFoundError": "mnemoray.artifacts.store",
    "ArtifactStore": "mnemoray.artifacts.store",
    "ArtifactsAt": "mnemoray.artifacts.view",
    "FileArtifactStore": "mnemoray.artifacts.files",
    "InMemoryArtifactStore": "mnemoray.artifacts.store",
    "OffloadPolicy": "mnemoray.artifacts.offload",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _EXPORTS, name)
