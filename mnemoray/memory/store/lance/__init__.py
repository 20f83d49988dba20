"""The LanceDB memory backend (``lancedb://DIR``; the ``lancedb`` extra).

:class:`LanceStore` implements :class:`~mnemoray.memory.store.protocol.MemoryBackend` on LanceDB
tables in one directory, embedded (no server process); :class:`LanceView` is its read
view. Open it through :func:`mnemoray.memory.store.protocol.open_backend`.
"""

from mnemoray.memory.store.lance.store import LanceStore
from mnemoray.memory.store.lance.view import LanceView
from mnemoray.memory.store.lance.writes import LancePending

__all__ = ["LancePending", "LanceStore", "LanceView"]
