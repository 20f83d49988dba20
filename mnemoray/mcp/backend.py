"""The small interface the MCP server talks to, whichever store answers.

Two implementations: :class:`~mnemoray.mcp.local.LocalBackend` (the one
``MemoryService`` over a store directory, in this process, no Ray) and
:class:`~mnemoray.mcp.remote.RemoteBackend` (a running ``mnemoray serve`` through
:class:`~mnemoray.client.MnemorayClient`). Both speak the HTTP API's JSON, so a tool
answers the same whichever backend is behind it. Every call names its (app, user):
the backend does not pick a tenant, the server does, once, at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

#: Who the local backend records on tombstones and edits made through MCP.
ACTOR = "mcp"


class Backend(Protocol):
    """Memory and context operations, JSON in and out (the HTTP API's shapes)."""

    #: Where the data lives, for people: "store /path" or "server http://...".
    where: str

    def recall(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        """``{"memories": [RecallResult.to_dict(), ...], ...}``, best first;
        ``budget_tokens``: the best that fit in that many tokens."""
        ...

    def add_memories(
        self, app_name: str, user_id: str, memories: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Raw memories (``MemoryIn`` dicts): ``{"added", "duplicates", "status",
        "memories"}``; committed before it returns."""
        ...

    def add_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Distill a whole session (the archive's dict, of this app and user) into
        memories; the same answer as :meth:`add_memories`. ``agent_name``: whose
        memories they are (None: as the app's scopes say)."""
        ...

    def list_memories(
        self, app_name: str, user_id: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        """A page of live memories, oldest first: ``{"memories", "next_cursor"}``."""
        ...

    def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> int:
        """Forget one memory of this user; how many were live (0 or 1)."""
        ...

    def forget_everything(self, app_name: str, user_id: str, reason: str) -> dict[str, Any]:
        """Erase the user: jobs, sessions, artifacts, memories (``DELETE
        /v1/users/{app}/{user}``); the erasure's record, with what was removed."""
        ...

    def forget_by_query(
        self,
        app_name: str,
        user_id: str,
        *,
        dry_run: bool,
        query: str | None,
        top_k: int,
        confirm: str | None,
        memory_ids: Sequence[str] | None,
    ) -> dict[str, Any]:
        """The service's forget by query: ``dry_run`` previews (``confirm_token``),
        ``confirm`` forgets exactly what the preview listed."""
        ...

    def compile(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        agent: Mapping[str, Any],
        new_message: str | None,
        temp_state: Mapping[str, Any] | None,
        memory_agent: str | None = None,
    ) -> dict[str, Any]:
        """The ``CompiledRequest`` dict of a stored session for ``agent``; its memory
        block recalled as ``memory_agent`` when given ("": the shared memories only)."""
        ...

    def close(self) -> None: ...
