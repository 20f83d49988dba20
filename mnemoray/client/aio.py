"""The asynchronous client: the same calls as :class:`MnemorayClient`, awaited."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from mnemoray.client import memory_calls as mc
from mnemoray.client import session_calls as sc
from mnemoray.client.call import Call, signature_of
from mnemoray.client.retry import RetryPolicy
from mnemoray.client.sync import DEFAULT_URL, auth_headers
from mnemoray.schemas.memories import MemoryOut
from mnemoray.schemas.sessions import JobOut

P = ParamSpec("P")
T = TypeVar("T")


def _bound(
    build: Callable[P, Call[T]],
) -> Callable[Concatenate[AsyncMnemorayClient, P], Awaitable[T]]:
    """A coroutine method running the call that ``build`` makes (same signature, doc)."""

    @functools.wraps(build)
    async def method(self: AsyncMnemorayClient, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.run(build(*args, **kwargs))

    method.__signature__ = signature_of(build)  # type: ignore[attr-defined]
    return method


class AsyncMnemorayClient:
    """Asynchronous client (``httpx.AsyncClient``); use ``async with`` or ``aclose()``.

    ``http``: an ``httpx.AsyncClient`` of your own (e.g. over ``httpx.ASGITransport``
    to an app in the same process; closed with this client). ``retry``: as :class:`MnemorayClient`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._http = http or httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=timeout, transport=transport
        )
        self._auth = auth_headers(api_key)
        self.retry = retry or RetryPolicy()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMnemorayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, call: Call[T]) -> T:
        """Send ``call``, asking again as :attr:`retry` allows; its typed result."""
        request = call.request(self._http, self._auth)
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = await self._http.send(request)
            except httpx.TransportError as exc:
                wait = self.retry.after_error(exc, attempt, call.retry_safe)
                if wait is None:
                    raise
            else:
                wait = self.retry.after_status(resp, attempt, call.retry_safe)
                if wait is None:
                    return call.result(resp)
                await resp.aclose()
            await asyncio.sleep(wait)

    # -- ops, recall, memories --------------------------------------------------------------
    healthz = _bound(mc.healthz)
    metrics = _bound(mc.metrics)
    recall = _bound(mc.recall)
    recall_app = _bound(mc.recall_app)
    search = _bound(mc.search)
    add_memories = _bound(mc.add_memories)
    add_session = _bound(mc.add_session)
    list_memories = _bound(mc.list_memories)
    forget_memory = _bound(mc.forget_memory)
    forget_user = _bound(mc.forget_user)
    forget_everything = _bound(mc.forget_everything)
    forgotten = _bound(mc.forgotten)
    graph = _bound(mc.graph)
    profile = _bound(mc.profile)
    domain = _bound(mc.domain)
    edit_memory = _bound(mc.edit_memory)
    memory_versions = _bound(mc.memory_versions)
    preview_forget = _bound(mc.preview_forget)
    confirm_forget = _bound(mc.confirm_forget)
    list_apps = _bound(mc.list_apps)
    store_report = _bound(mc.store_report)
    # -- sessions, jobs, context, artifacts -------------------------------------------------
    create_session = _bound(sc.create_session)
    get_session = _bound(sc.get_session)
    delete_session = _bound(sc.delete_session)
    list_sessions = _bound(sc.list_sessions)
    append_events = _bound(sc.append_events)
    end_session = _bound(sc.end_session)
    get_job = _bound(sc.get_job)
    retry_job = _bound(sc.retry_job)
    compile = _bound(sc.compile)
    put_artifact = _bound(sc.put_artifact)
    get_artifact = _bound(sc.get_artifact)
    artifact_versions = _bound(sc.artifact_versions)
    artifact_names = _bound(sc.artifact_names)

    # -- helpers over several calls ---------------------------------------------------------
    async def iter_memories(
        self,
        app_name: str,
        user_id: str,
        page_size: int = 200,
        *,
        kind: str | None = None,
        session_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> AsyncIterator[MemoryOut]:
        """Every memory of the user (passing the filters of ``list_memories``), oldest
        first, fetched a page at a time (``async for m in client.iter_memories(...)``)."""
        cursor: str | None = None
        while True:
            page = await self.list_memories(
                app_name,
                user_id,
                cursor,
                page_size,
                kind=kind,
                session_id=session_id,
                since=since,
                until=until,
            )
            for memory in page.memories:
                yield memory
            cursor = page.next_cursor
            if not cursor:
                return

    async def wait_for_job(
        self,
        app_name: str,
        user_id: str,
        job_id: str,
        *,
        timeout_s: float = 60.0,
        poll_s: float = 0.1,
    ) -> JobOut:
        """Poll until the job is ``done`` or ``failed``; after ``timeout_s`` the job as
        it is then (check its ``status``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = await self.get_job(app_name, user_id, job_id)
            if job.status in sc.FINISHED or time.monotonic() >= deadline:
                return job
            await asyncio.sleep(poll_s)


__all__ = ["AsyncMnemorayClient"]
