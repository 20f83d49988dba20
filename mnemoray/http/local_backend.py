"""The HTTP API's backend without Ray: one process over a local store (``mnemoray ui``).

The same parts as a Serve replica (:mod:`mnemoray.http.parts`: the memory
service in-process over a Parquet or LanceDB store, SQLite sessions, file artifacts,
the compiler, durable ingestion jobs, automatic compaction), answering the same routes
through :func:`mnemoray.http.app.build_api`; queries are embedded by the same batched
query encoder (:mod:`mnemoray.embedders.query_encoder`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mnemoray.http.metrics import Metrics
from mnemoray.http.models import local_embedder, local_summarizer
from mnemoray.http.parts import IO_THREADS, ReplicaParts, build_parts, recall_hook
from mnemoray.settings.serve import ServeSettings, parse_settings


class LocalBackend:
    """An :class:`mnemoray.http.backend.ApiBackend` in this process (no Ray).

    ``settings``: the Serve settings (a mapping or parsed), of which this uses the
    store, models, recall, ingestion, compaction, scopes and hygiene groups. Call
    :meth:`close` when done (stops the job worker, compaction and the service).
    """

    def __init__(self, settings: Mapping[str, Any] | ServeSettings) -> None:
        s = self.settings = parse_settings(settings)
        self.io_pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="mnemoray-io")
        # build_parts stops what it started if it fails; past it, close() does. Queries
        # are embedded by the write embedder when the specs agree: one model loaded.
        self.parts: ReplicaParts = build_parts(
            s, local_embedder(s), local_summarizer(s), share_write=True
        )
        self.memory, self.ops = self.parts.memory, self.parts.ops
        self.sessions = self.parts.sessions
        self.artifacts = self.parts.artifacts
        self.metrics: Metrics = self.parts.metrics
        try:
            self.parts.start_jobs(self.memory_op_sync)
        except BaseException:
            with contextlib.suppress(Exception):  # the failure that got here is the news
                self.close()
            raise

    @classmethod
    def open(
        cls,
        store: str,
        *,
        sessions_db: str | None = None,
        artifacts_dir: str | None = None,
        **groups: Any,
    ) -> LocalBackend:
        """Over ``store`` (a path, ``parquet://DIR`` or ``lancedb://DIR``); sessions and
        artifacts beside it unless given; ``groups``: other settings groups by name."""
        ingestion = dict(groups.pop("ingestion", {}) or {})
        if sessions_db is not None:
            ingestion["sessions_db"] = sessions_db
        if artifacts_dir is not None:
            ingestion["artifacts_dir"] = artifacts_dir
        return cls({"store": store, **({"ingestion": ingestion} if ingestion else {}), **groups})

    def close(self) -> None:
        """Let the requests' work finish (queued work is dropped), then stop the parts:
        the service, the job worker, compaction, then the job queue and session store
        connections (:meth:`ReplicaParts.stop`). A pool thread still running would
        otherwise write through a store already closed."""
        self.io_pool.shutdown(wait=True, cancel_futures=True)
        self.parts.stop()

    # -- plumbing ----------------------------------------------------------------------
    async def run_io(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self.io_pool, functools.partial(fn, *args, **kwargs)
        )

    # -- memory --------------------------------------------------------------------------
    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        return await self.run_io(self.memory_op_sync, op, app_name, user_id, **kwargs)

    def memory_op_sync(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        assert self.ops is not None
        return self.ops.call(op, app_name, user_id, kwargs)

    async def recall(
        self,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
        explain: bool = False,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        request = self.parts.resolve(
            app_name, user_id, query, top_k, filters, mode, explain, budget_tokens
        )
        return await self.parts.recall_here(self.run_io, request)

    async def recall_app(
        self,
        app_name: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
    ) -> dict[str, Any]:
        request = self.parts.resolve(app_name, None, query, top_k, filters, mode)
        return await self.memory_op("recall_app", app_name, "", request=request)

    async def domain(self, app_name: str) -> dict[str, Any]:
        return await self.memory_op("domain", app_name, "")

    def tenants(self, apps: Collection[str] | None = None) -> dict[str, Any]:
        return self.parts.tenants(apps)

    def store_report(self) -> dict[str, Any]:
        return self.parts.store_report()

    # -- compile: the compiler's recall goes through recall() --------------------------
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
        at_event_id: str | None = None,
    ) -> dict[str, Any]:
        search = functools.partial(recall_hook, self.recall, asyncio.get_running_loop())
        return await self.run_io(
            self.parts.compile,
            app_name,
            user_id,
            session_id,
            agent,
            new_message,
            temp_state,
            callee,
            search,
            self.memory_op_sync,
            at_event_id,
            memory_agent,
        )

    # -- ingestion: durable jobs (serve.ingestion) ------------------------------------------
    def end_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        wait: bool = False,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        assert self.parts.ingestion is not None
        return self.parts.ingestion.end_session(
            app_name, user_id, session_id, wait=wait, submitter=submitter
        )

    def enqueue_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        assert self.parts.ingestion is not None
        return self.parts.ingestion.enqueue_session(app_name, user_id, session, submitter=submitter)

    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        assert self.parts.ingestion is not None
        return self.parts.ingestion.get_job(app_name, user_id, job_id)

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        assert self.parts.ingestion is not None
        return self.parts.ingestion.retry_job(app_name, user_id, job_id)

    # -- erasure (mnemoray.memory.hygiene.erasure) ---------------------------------------------
    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, actor: str = ""
    ) -> dict[str, Any]:
        return self.parts.delete_session(app_name, user_id, session_id, actor=actor)

    def forget_everything(
        self, app_name: str, user_id: str, *, reason: str = "", actor: str = ""
    ) -> dict[str, Any]:
        return self.parts.forget_everything(app_name, user_id, reason=reason, actor=actor)


__all__ = ["LocalBackend"]
