"""Google ADK on mnemoray: memory, session and artifact services, and the mapping.

    from mnemoray.adk import (MnemorayArtifactService, MnemorayMemoryService,
                              MnemoraySessionService, register)

    register()   # ADK's service registry now resolves mnemoray:// URIs

The services need ``google-adk``; the session mapping (:mod:`mnemoray.adk.importer`)
does not, so this package imports the services lazily: archives are read where
google-adk is not installed.
"""

from __future__ import annotations

from typing import Any

from mnemoray.lazy_face import lazy_export

_LAZY = {
    "MnemorayMemoryService": "mnemoray.adk.memory",
    "MemorySource": "mnemoray.adk.memory",
    "memory_entry": "mnemoray.adk.convert",
    "memory_from_entry": "mnemoray.adk.convert",
    "MnemoraySessionService": "mnemoray.adk.sessions",
    "MnemorayArtifactService": "mnemoray.adk.artifacts",
    "RemoteMemorySource": "mnemoray.adk.remote",
    "register": "mnemoray.adk.registry",
    "MnemorayUri": "mnemoray.adk.uri",
    "parse_uri": "mnemoray.adk.uri",
    "AdkImportError": "mnemoray.adk.mapping",
    "events_from_adk": "mnemoray.adk.importer",
    "looks_like_adk": "mnemoray.adk.mapping",
    "session_from_adk": "mnemoray.adk.importer",
}


def __getattr__(name: str) -> Any:
    return lazy_export(__name__, _LAZY, name)


__all__ = sorted(_LAZY)
