"""What the HTTP routes need from the server behind them (the ingress replica).

The routes (``mnemoray/serve/routes``) depend on this protocol only, never on the Ray
deployment class: they can be served, tested and read without Ray, and the
deployment imports the routes, not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mnemoray.artifacts.offload import DEFAULT_THRESHOLD_BYTES
from mnemoray.artifacts.store import ArtifactStore
from mnemoray.http.auth import ApiKeys
from mnemoray.http.metrics import Metrics
from mnemoray.limits import MAX_SYNC_EMBED_CHARS
from mnemoray.sessions.store import SessionStore

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class HttpConfig:
    """The HTTP edge's own settings: who may call, and how big a body may be."""

    keys: ApiKeys = field(default_factory=ApiKeys.none)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    allow_remote_without_keys: bool = False
    #: Add ``X-Request-ID`` to responses. Off behind Ray Serve's proxy: it adds the
    #: header itself, with the id it put in the request (the one this app uses).
    echo_request_id: bool = True
    #: Serve /docs, /redoc and /openapi.json (they answer without a key). None: only
    #: when the server runs open (no keys), so a keyed server shows nothing unasked.
    docs: bool | None = None
    #: Tool results over this many bytes are stored as artifacts when appended (0: off).
    offload_bytes: int = DEFAULT_THRESHOLD_BYTES
    #: Characters one synchronous add may ask to embed (``server.max_sync_embed_chars``).
    max_sync_embed_chars: int = MAX_SYNC_EMBED_CHARS

    @property
    def docs_open(self) -> bool:
        return self.keys.open if self.docs is None else self.docs


class ApiBackend(Protocol):
    """One replica's memory, sessions, artifacts and compiler, as the routes call them.

    Blocking work goes through :meth:`run_io` (a thread pool) so the event loop
    keeps answering recalls. Errors are :class:`mnemoray.errors.MnemorayError`
    subclasses; the HTTP edge maps them to statuses by class.
    """

    metrics: Metrics

    # Read-only members: a backend may hold any implementation of each store.
    @property
    def sessions(self) -> SessionStore: ...

    @property
    def artifacts(self) -> ArtifactStore: ...

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
        """``{"memories": [...], "store_version": ...}``, best first; ``explain``: each
        with ``contributions`` (what each signal added to its score); ``budget_tokens``:
        the best that fit in that many tokens."""
        ...

    async def recall_app(
        self,
        app_name: str,
        query: str,
        top_k: int,
        filters: Mapping[str, Any] | None,
        mode: str | None,
    ) -> dict[str, Any]:
        """Recall across every user of ``app_name``: ``{"memories": [...] (each with its
        ``user_id``), "store_version": ...}``, best first. The route checks the key."""
        ...

    async def domain(self, app_name: str) -> dict[str, Any]:
        """The app's domain index (``MemoryService.domain`` as JSON): every user of the app,
        so every shard's part where no replica holds them all. The route checks the key."""
        ...

    async def memory_op(self, op: str, app_name: str, user_id: str, **kwargs: Any) -> Any:
        """One tenant-scoped memory operation: ``add_session``, ``add_memories``,
        ``list_memories``, ``forget_memory``, ``forget_user``."""
        ...

    async def run_io(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` off the event loop."""
        ...

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
        """The CompiledRequest dict of one model call; ``callee`` (``{"prompt",
        "artifacts"}``): of an agent called as a tool (mnemoray.compiler.callee);
        ``memory_agent``: whose memories the preload recalls (agent_names.memory_view);
        ``at_event_id``: the session as it was right after that event (NotFound if none
        has that id)."""
        ...

    def tenants(self, apps: Collection[str] | None = None) -> dict[str, Any]:
        """The apps of ``apps`` (None: every app) with memories or sessions, and their
        users (:func:`mnemoray.http.inspector.tenants`; blocking: through
        :meth:`run_io`). The route hides the users from who may not see them;
        Unsupported where no replica holds every shard."""
        ...

    def store_report(self) -> dict[str, Any]:
        """``{"stats", "doctor", "runs"}`` of the whole store (blocking; see
        mnemoray.http.inspector). The route checks the key."""
        ...

    def end_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        wait: bool = False,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        """End a session (blocking: run it through :meth:`run_io`) and queue its memory
        ingestion: ``{"session_id", "ended_at", "job_id"}``. ``wait``: run the job before
        answering, ``{"session_id", "ended_at", "ingestion": {...}}``. Ending an ended
        session queues a new job (the retry of a failed one). ``submitter``: the caller's
        actor, whose pending jobs are bounded (``ingestion.jobs``)."""
        ...

    def enqueue_session(
        self,
        app_name: str,
        user_id: str,
        session: Mapping[str, Any],
        *,
        submitter: str | None = None,
    ) -> dict[str, Any]:
        """Queue a posted session's ingestion (blocking; its input is on disk when this
        returns): ``{"job_id", "status"}``; ``submitter`` as for :meth:`end_session`."""
        ...

    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        """``{"job_id", "status", "memories_added", "error"}`` of the tenant's job
        (blocking); another tenant's is :class:`mnemoray.errors.NotFound`."""
        ...

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        """Queue a failed job again (blocking); its status as :meth:`get_job`."""
        ...

    def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, actor: str = ""
    ) -> dict[str, Any]:
        """Delete the tenant's session, its own artifacts, queued jobs and memories
        (blocking): ``{"session_id", "deleted_at", "removed": {...counts}}``; another
        tenant's is :class:`mnemoray.errors.NotFound`."""
        ...

    def forget_everything(
        self, app_name: str, user_id: str, *, reason: str = "", actor: str = ""
    ) -> dict[str, Any]:
        """Forget everything about the user (blocking; the order and its record:
        :mod:`mnemoray.memory.hygiene.erasure`): ``{"app_name", "user_id", "erased_at",
        "removed": {...counts}}``."""
        ...
