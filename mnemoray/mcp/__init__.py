"""``mnemoray mcp``: the Model Context Protocol server (official ``mcp`` SDK).

    from mnemoray.mcp import LocalBackend, Tenant, build_server
    build_server(LocalBackend.open("STORE"), Tenant("shop", "ana")).run()   # stdio

Tools ``recall``, ``remember``, ``forget``, ``compile_context``; resources for the
user's memories and profile. The backend is a store in this process
(:class:`LocalBackend`) or a running ``mnemoray serve`` (:class:`RemoteBackend`).
"""

from __future__ import annotations

from typing import Any

from mnemoray.mcp.backend import Backend
from mnemoray.mcp.errors import MnemorayMCP
from mnemoray.mcp.profile import build_profile
from mnemoray.mcp.remote import RemoteBackend
from mnemoray.mcp.server import Tenant, build_server


def __getattr__(name: str) -> Any:
    # The local backend loads the store's stack (numpy, pyarrow, faiss): only when asked,
    # so a server for --url runs on the client's dependencies.
    if name == "LocalBackend":
        from mnemoray.mcp.local import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Backend",
    "LocalBackend",
    "MnemorayMCP",
    "RemoteBackend",
    "Tenant",
    "build_profile",
    "build_server",
]
