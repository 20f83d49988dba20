"""The HTTP backend protocol over a real MemoryService and compiler, as the ingress
replica wires them, without Ray: for tests of the HTTP edge over real data."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any

from mnemoray.artifacts.store import InMemoryArtifactStore
from mnemoray.compiler import AgentSpec, Callee, Compiler, Services
from mnemoray.http.compaction import start_auto_compaction
from mnemoray.http.metrics import Metrics
from mnemoray.memory.hygiene.erasure import Erasure
from mnemoray.memory.records.agent_names import memory_view
from mnemoray.memory.service.json_ops import MemoryOps
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.store import InMemorySessionStore
from mnemoray.settings.compaction import CompactionSettings


class ServiceBackend:
    """The HTTP backend protocol over a real MemoryService and compiler, as the ingress
    replica wires them (no Ray)."""

    def __init__(
        self, service: MemoryService, compaction: CompactionSettings | None = None
    ) -> None:
        self.service = service
        self.ops = MemoryOps(service)
        self.metrics = Metrics(lambda: {})
        self.sessions = InMemorySessionStore()
        self.artifacts = InMemoryArtifactStore()
        self.compiler = Compiler.default()
        # Compaction after appends, as the ingress wires it (mnemoray.http.compaction).
        self.compaction = start_auto_compaction(
            compaction or CompactionSettings(), self.sessions, service.summarizer, self.metrics
        )

    async def run_io(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *args, **kwargs)
        )

    async def recall(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        args = {"query": query, "top_k": top_k, "filters": filters, "mode": mode}
        return await self.run_io(
            self.ops.call, "recall", app_name, user_id, {**args, "budget_tokens": budget_tokens}
        )

    async def recall_app(
        self,
        app_name: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
    ) -> dict[str, Any]:
        return await self.run_io(
            self.ops.call,
            "recall_app",
            app_name,
            "",
            {"query": query, "top_k": top_k, "filters": filters, "mode": mode},
        )

    def erasure(self) -> Erasure:
        """Erasure over this backend's parts (no job queue: nothing is queued here)."""
        return Erasure(
            self.sessions,
            self.artifacts,
            None,
            lambda op, app, user, **kw: self.ops.call(op, app, user, kw),
        )

    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, actor: str = ""
    ) -> dict[str, Any]:
        return self.erasure().delete_session(app_name, user_id, session_id, actor=actor)

    def forget_everything(
        self, app_name: str, user_id: str, *, reason: str = "", actor: str = ""
    ) -> dict[str, Any]:
        return self.erasure().forget_user(app_name, user_id, reason=reason, actor=actor)

    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        return await self.run_io(self.ops.call, op, app_name, user_id, kwargs)

    async def compile(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        agent: Mapping[str, Any],
        new_message: str | None,
        temp_state: Mapping[str, Any] | None,
        callee: Mapping[str, Any] | None = None,
        memory_agent: str | None = None,
    ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            session = self.sessions.get_session(app_name, user_id, session_id)
            spec = AgentSpec(**agent)  # its memory view: shared + its own (scopes)
            services = Services(
                memory_search=self.service.memory_search(memory_view(spec.name, memory_agent)),
                artifacts=self.artifacts,
            )
            return self.compiler.compile(
                session,
                spec,
                new_message,
                services,
                dict(temp_state) if temp_state else None,
                Callee.from_dict(callee) if callee else None,
            ).to_dict()

        return await self.run_io(work)
