"""The LanceDB memory backend (``lancedb://DIR``; the ``lancedb`` extra).

:class:`LanceStore` implements :class:`~mnemoray.memory.backend.MemoryBackend` on LanceDB
tables in one directory, embedded (no server process); :class:`LanceView` is its read
view. Open it through :func:`mnemoray.memory.backend.open_backend`.
"""

from mnemoray.memory.lance.store import LanceStore
from mnemoray.memory.lance.view import LanceView
from mnemoray.memory.lance.writes import LancePending

__all__ = ["LancePending", "LanceStore", "LanceView"]
