"""Kept import path: the ADK memory service lives in :mod:`mnemoray.adk.memory`.

Importing this module needs ``google-adk`` (``pip install google-adk``).
"""

from mnemoray.adk.convert import memory_entry
from mnemoray.adk.memory import MemorySource, MnemorayMemoryService

__all__ = ["MemorySource", "MnemorayMemoryService", "memory_entry"]
