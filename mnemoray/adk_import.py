"""Kept import path: the ADK session mapping lives in :mod:`mnemoray.adk.importer`."""

from mnemoray.adk.importer import (
    AdkImportError,
    events_from_adk,
    looks_like_adk,
    session_from_adk,
)

__all__ = ["AdkImportError", "events_from_adk", "looks_like_adk", "session_from_adk"]
