"""The MCP server's remote backend: a running ``mnemoray serve``, through the client.

The server applies its own API keys and limits; this side only forwards. A
connection failure becomes :class:`~mnemoray.errors.Unavailable` naming the URL, so
a tool says "cannot reach ..." in one line instead of an httpx traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel

from mnemoray.client import Call, MnemorayClient
from mnemoray.errors import Unavailable


class RemoteBackend:
    """:class:`~mnemoray.mcp.backend.Backend` over a ``mnemoray serve`` HTTP API."""

    def __init__(self, client: MnemorayClient, url: str) -> None:
        self.client = client
        self.url = url
        self.where = f"server {url}"

    @classmethod
    def open(cls, url: str, api_key: str | None = None, *, timeout: float = 60.0) -> RemoteBackend:
        return cls(MnemorayClient(url, api_key, timeout=timeout), url)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn``'s answer as plain JSON (the client answers with the server's models)."""
        try:
            out = fn(*args, **kwargs)
        except httpx.TransportError as exc:  # no answer at all (an HTTP error has one)
            raise Unavailable(
                f"cannot reach the mnemoray server at {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        return out.model_dump(mode="json") if isinstance(out, BaseModel) else out

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
        flt = dict(filters or {})
        agent = flt.pop("agent_name", None)  # the API takes the agent beside the filters
        return self._call(
            self.client.recall,
            app_name,
            user_id,
            query,
            top_k,
            flt or None,
            mode,
            agent_name=agent,
            budget_tokens=budget_tokens,
        )

    def add_memories(
        self, app_name: str, user_id: str, memories: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        return self._call(self.client.add_memories, app_name, user_id, memories)

    def add_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        # The caller checked the session's own app_name/user_id against these.
        raw = {**session, "app_name": app_name, "user_id": user_id}
        return self._call(self.client.add_session, raw, wait=True, agent_name=agent_name)

    def list_memories(
        self, app_name: str, user_id: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        return self._call(self.client.list_memories, app_name, user_id, cursor, limit)

    def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> int:
        return self._call(self.client.forget_memory, app_name, user_id, memory_id)

    def forget_everything(self, app_name: str, user_id: str, reason: str) -> dict[str, Any]:
        out: dict[str, Any] = self._call(self.client.forget_everything, app_name, user_id, reason)
        return out

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
        # The route's body as is: the server's forget-by-query rules answer (which
        # arguments go with dry_run, which with confirm), not a copy of them here.
        body = {
            "app_name": app_name,
            "user_id": user_id,
            "dry_run": dry_run,
            "top_k": top_k,
            "query": query,
            "confirm": confirm,
            "memory_ids": list(memory_ids) if memory_ids is not None else None,
        }
        call = Call(
            "POST",
            "/v1/memories:forget",
            lambda resp: resp.json(),
            json={k: v for k, v in body.items() if v is not None},
        )
        return self._call(self.client.run, call)

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
        return self._call(
            self.client.compile,
            app_name,
            user_id,
            session_id,
            dict(agent),
            new_message,
            temp_state,
            memory_agent=memory_agent,
        )

    def close(self) -> None:
        self.client.close()
