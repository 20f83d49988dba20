"""The MCP server's embedded backend: the one ``MemoryService`` over a store directory.

No Ray and no server process: recall, add and forget run in this process through
the same JSON layer the HTTP API uses (``mnemoray.memory.service.json_ops.MemoryOps``), so a tool's
answer has the HTTP answer's shape. Sessions and artifacts for ``compile_context``
live where ``mnemoray serve`` keeps them by default (``STORE/sessions.db``,
``STORE/artifacts``), so a store a server wrote is compiled the same way here.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mnemoray.artifacts.files import FileArtifactStore
from mnemoray.compiler import AgentSpec, Compiler, Services, TemplateError
from mnemoray.embedders import write_model
from mnemoray.errors import InvalidInput, MnemorayError
from mnemoray.mcp.backend import ACTOR
from mnemoray.memory.hygiene.erasure import store_erasure
from mnemoray.memory.records.agent_names import memory_view
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.sqlite.store import SQLiteSessionStore


class LocalBackend:
    """:class:`~mnemoray.mcp.backend.Backend` over a ``MemoryService`` in this process."""

    def __init__(
        self, service: MemoryService, sessions_db: str | Path, artifacts_dir: str | Path
    ) -> None:
        self.service = service
        self.ops = MemoryOps(service)
        self.where = f"store {service.store.root}"
        self.compiler = Compiler.default()
        self._sessions_db = Path(sessions_db)
        self._artifacts_dir = Path(artifacts_dir)
        self._context: tuple[SQLiteSessionStore, FileArtifactStore] | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, store: str | Path, embedder: str | None = "default", summarizer: str = "extractive"
    ) -> LocalBackend:
        """A backend over the store at ``store`` (created on first write)."""
        # A path, parquet://DIR or lancedb://DIR (mnemoray.memory.store.protocol.open_backend).
        service = MemoryService.open(store, embedder=embedder, summarizer=summarizer)
        root = service.store.root
        try:  # `remember` writes: refuse at start what every write would refuse later
            write_model(service.store, service.embedder)
        except MnemorayError:
            service.close()
            raise
        return cls(service, root / "sessions.db", root / "artifacts")

    def _session_context(self) -> tuple[SQLiteSessionStore, FileArtifactStore]:
        # Opened on the first compile only: recall and remember never create these files.
        with self._lock:
            if self._context is None:
                self._context = (
                    SQLiteSessionStore(self._sessions_db),
                    FileArtifactStore(self._artifacts_dir),
                )
            return self._context

    # -- memory ------------------------------------------------------------------------
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
        request = self.service.resolve(
            app_name, user_id, query, top_k, filters, mode, budget_tokens=budget_tokens
        )
        return self.ops.call("recall", app_name, user_id, {"request": request})

    def add_memories(
        self, app_name: str, user_id: str, memories: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        return self.ops.call(
            "add_memories", app_name, user_id, {"memories": list(memories), "actor": ACTOR}
        )

    def add_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        return self.ops.call(
            "add_session", app_name, user_id, {"session": dict(session), "agent_name": agent_name}
        )

    def list_memories(
        self, app_name: str, user_id: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        return self.ops.call("list_memories", app_name, user_id, {"cursor": cursor, "limit": limit})

    def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> int:
        return self.ops.call(
            "forget_memory", app_name, user_id, {"memory_id": memory_id, "actor": ACTOR}
        )

    def forget_everything(self, app_name: str, user_id: str, reason: str) -> dict[str, Any]:
        with store_erasure(
            lambda op, app, user, **kw: self.ops.call(op, app, user, kw),
            self._sessions_db,
            self._artifacts_dir,
        ) as erasure:
            return erasure.forget_user(app_name, user_id, reason=reason, actor=ACTOR)

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
        return self.ops.call(
            "forget_by_query",
            app_name,
            user_id,
            {
                "dry_run": dry_run,
                "query": query,
                "top_k": top_k,
                "confirm": confirm,
                "memory_ids": memory_ids,
                "actor": ACTOR,
            },
        )

    # -- context -----------------------------------------------------------------------
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
        try:  # errors name the argument as the HTTP route does: agent.<field>
            spec = AgentSpec(**agent)
        except InvalidInput as exc:
            raise exc.within("agent") from exc
        sessions, artifacts = self._session_context()
        session = sessions.get_session(app_name, user_id, session_id)
        view = memory_view(spec.name, memory_agent)
        services = Services(
            memory_search=self.service.memory_search(view),
            artifacts=artifacts,
            user_profile=self.service.profile_source(),
        )
        try:
            request = self.compiler.compile(
                session, spec, new_message, services, dict(temp_state) if temp_state else None
            )
        except TemplateError as exc:  # the template is the agent's instruction
            raise exc.within("agent") from exc
        return request.to_dict()

    def close(self) -> None:
        with self._lock:
            if self._context is not None:
                self._context[0].close()
                self._context = None
        self.service.close()
