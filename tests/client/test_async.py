"""The async client against the real API in-process (``httpx.ASGITransport`` into
``build_api`` over a real MemoryService, compiler and job queue), and its retries
against a real ASGI app that fails first."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI

from mnemoray.client import AsyncMnemorayClient, RetryPolicy, UnavailableAPIError
from mnemoray.compiler import AgentSpec, Callee
from mnemoray.errors import Conflict, Forbidden, InvalidInput, NotFound, Unavailable
from mnemoray.schemas.compile import CompiledRequestOut
from mnemoray.schemas.memories import MemoryOut, RecallResponse
from mnemoray.schemas.sessions import EndSessionAccepted, JobAccepted, JobOut
from mnemoray.sessions.events import user_message
from tests.support.client_fixtures import KEY, Flaky, api  # noqa: F401  (api: a fixture)
from tests.support.factories import parrot

T = TypeVar("T")
FAST = RetryPolicy(attempts=3, backoff_s=0.001, max_backoff_s=0.01)


def run(
    app: Any, work: Callable[[AsyncMnemorayClient], Awaitable[T]], retry: RetryPolicy = FAST
) -> T:
    """``work`` with an async client whose requests go straight into ``app``."""

    async def main() -> T:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app.test")
        async with AsyncMnemorayClient(api_key=KEY, http=http, retry=retry) as mr:
            return await work(mr)

    return asyncio.run(main())


def test_async_memories_typed_paged_and_forgotten(api: FastAPI) -> None:  # noqa: F811
    async def work(mr: AsyncMnemorayClient) -> None:
        texts = [f"Ana's note {i}: her bike is number {i}." for i in range(5)]
        added = await mr.add_memories("app", "ana", texts)
        assert added.added == 5
        # One client, many requests in flight at once.
        answers = await asyncio.gather(
            *(
                mr.recall("app", "ana", f"bike number {i}", top_k=1, mode="keyword")
                for i in range(5)
            )
        )
        assert all(isinstance(a, RecallResponse) for a in answers)
        assert [a.memories[0].text for a in answers] == texts
        got = await mr.search("app", "ana", "bike number 2", top_k=1, mode="keyword")
        assert got.memories[0].text == texts[2]
        every = [m async for m in mr.iter_memories("app", "ana", page_size=2)]
        assert all(isinstance(m, MemoryOut) for m in every)
        assert sorted(m.memory_id for m in every) == sorted(m.memory_id for m in added.memories)
        mid = every[0].memory_id
        edited = await mr.edit_memory("app", "ana", mid, "Ana sold her bike.")
        versions = await mr.memory_versions("app", "ana", edited.memory.memory_id)
        assert [v.current for v in versions.versions] == [False, True]
        preview = await mr.preview_forget("app", "ana", "sold bike", top_k=1, mode="keyword")
        assert preview.memory_ids == [edited.memory.memory_id]
        done = await mr.confirm_forget("app", "ana", preview.confirm_token, reason="gone")
        assert done.forgotten == 1
        assert (await mr.forgotten("app", "ana"))[-1].reason == "gone"
        assert await mr.forget_user("app", "ana") == 4
        with pytest.raises(NotFound):
            await mr.forget_memory("app", "ana", mid)
        with pytest.raises(InvalidInput) as bad:
            await mr.recall("app", "ana", "q", top_k=0)
        assert bad.value.field == "top_k"
        with pytest.raises(Forbidden):
            await mr.list_memories("other-app", "ana")

    run(api, work)


def test_async_sessions_compile_and_jobs(api: FastAPI) -> None:  # noqa: F811
    async def work(mr: AsyncMnemorayClient) -> None:
        session = await mr.create_session("app", "ana", "trip", compaction={"keep_last": 4})
        await mr.append_events(
            "app", "ana", "trip", [user_message("Plan my trip.")], expected_version=session.version
        )
        await mr.put_artifact("app", "ana", "trip", "notes.txt", b"pack light")
        assert (await mr.get_artifact("app", "ana", "trip", "notes.txt")).data == b"pack light"
        out = await mr.compile(
            "app",
            "ana",
            "trip",
            AgentSpec(name="packer"),
            callee=Callee("What should I pack?", ("notes.txt",)),
        )
        assert isinstance(out, CompiledRequestOut)
        assert out.contents[-1].text == "What should I pack?"

        queued = await mr.add_session(parrot(user="ana", sid="chat"), wait=False)
        assert isinstance(queued, JobAccepted)
        job = await mr.wait_for_job("app", "ana", queued.job_id, timeout_s=30)
        assert isinstance(job, JobOut) and job.status == "done" and job.memories_added > 0
        with pytest.raises(Conflict):
            await mr.retry_job("app", "ana", queued.job_id)
        ended = await mr.end_session("app", "ana", "trip")
        assert isinstance(ended, EndSessionAccepted)
        assert (await mr.wait_for_job("app", "ana", ended.job_id, timeout_s=30)).status == "done"
        assert [s.ended_at is not None for s in await mr.list_sessions("app", "ana")] == [True]

    run(api, work)


def test_async_retries_only_what_is_safe_to_repeat() -> None:
    app = Flaky(fails=2, status=503, retry_after="0.1")
    start = time.monotonic()
    out = run(app, lambda mr: mr.recall("app", "ana", "q"))
    assert out.store_version == 3 and len(app.calls) == 3
    assert time.monotonic() - start >= 0.2  # Retry-After, twice

    once = Flaky(fails=1, status=503)

    async def end(mr: AsyncMnemorayClient) -> None:
        with pytest.raises(UnavailableAPIError):
            await mr.end_session("app", "ana", "s1")

    run(once, end)
    assert once.calls == [("POST", "/v1/sessions/s1:end")]

    always = Flaky(fails=10, status=429)

    async def read(mr: AsyncMnemorayClient) -> None:
        with pytest.raises(Unavailable):  # 429 is "not now", as a 503 is
            await mr.get_session("app", "ana", "s1")

    run(always, read)
    assert len(always.calls) == FAST.attempts
