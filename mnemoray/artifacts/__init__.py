"""Versioned artifacts: large payloads the model sees as a handle and a summary; stores
in memory and on files, a read-only view at one event, and offloading large tool results."""

from mnemoray.artifacts.files import FileArtifactStore
from mnemoray.artifacts.offload import OffloadPolicy
from mnemoray.artifacts.store import (
    Artifact,
    ArtifactError,
    ArtifactNotFoundError,
    ArtifactStore,
    InMemoryArtifactStore,
)
from mnemoray.artifacts.view import ArtifactsAt

__all__ = [
    "Artifact",
    "ArtifactError",
    "ArtifactNotFoundError",
    "ArtifactStore",
    "ArtifactsAt",
    "FileArtifactStore",
    "InMemoryArtifactStore",
    "OffloadPolicy",
]
