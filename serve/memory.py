"""The memory service behind HTTP: JSON in and out, and models in other replicas.

- :class:`MemoryOps` turns the API's JSON into calls on the core ``MemoryService``
  (the one place recall, add, forget and reload live) and its answers back into
  JSON; ``call(op, app, user, kwargs)`` dispatches by name, which is how the
  ``Index`` deployment forwards operations to the replica holding a shard.
- :class:`RemoteEmbedder` / :class:`RemoteSummarizer` put the ``Embedder`` and
  ``Summarizer`` deployments behind the core interfaces, so the core write path
  (distill -> embed -> commit) runs unchanged with its models in other replicas.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mnemoray.embedders import Embedder, ModelMismatch
from mnemoray.errors import InvalidInput, MnemorayError, StoreCorrupt
from mnemoray.events import Event
from mnemoray.memory.record import Memory
from mnemoray.memory.retrieval import RecallFilters
from mnemoray.memory.service import MemoryService
from mnemoray.memory.snapshot import StoreSnapshot
from mnemoray.memory.store import session_content_hash
from mnemoray.memory.webhook import Webhook
from mnemoray.session import Session, SessionError
from mnemoray.summarizers.base import Summarizer, Summary

log = logging.getLogger(__name__)


# -- wire formats ------------------------------------------------------------------------
def memory_out(m: Memory) -> dict[str, Any]:
    d = m.to_dict()
    for name in ("key_text", "content_hash", "shard", "session_events", "session_updated_at"):
        d.pop(name, None)
    return d


def encode_cursor(created_at: float, memory_id: str) -> str:
    raw = json.dumps([created_at, memory_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, memory_id = json.loads(raw)
        return float(created_at), str(memory_id)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("malformed; pass the next_cursor of the previous page",
                           field="cursor") \
            from exc


class MemoryOps:
    """The HTTP API's memory operations over one ``MemoryService``, JSON in and out.

    Operations are ``op_<name>(app_name, user_id, **kwargs)``; every one is scoped
    to that (app, user), and the service enforces the same scope below.
    """

    OPS = frozenset({"recall", "add_session", "add_memories", "list_memories",
                     "forget_memory", "forget_session", "forget_user", "stats",
                     "forgotten", "edit_memory", "memory_versions", "forget_by_query"})

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def call(self, op: str, app_name: str, user_id: str,
             kwargs: Mapping[str, Any] | None = None) -> Any:
        if op not in self.OPS:
            # The ingress picks the op, never a client: an unknown one is a bug (500).
            raise ValueError(f"unknown memory operation {op!r}")
        try:
            return getattr(self, f"op_{op}")(app_name, user_id, **dict(kwargs or {}))
        except ModelMismatch as exc:
            # The server's models are its configuration, checked against the store at start:
            # a mismatch now (the manifest changed under it) is never the client's fault.
            raise StoreCorrupt(str(exc)) from exc

    def op_recall(self, app_name: str, user_id: str, query: str,
                  query_vec: np.ndarray | None = None, top_k: int = 5,
                  filters: RecallFilters | Mapping[str, Any] | None = None,
                  mode: str | None = None, snap: StoreSnapshot | None = None,
                  ) -> dict[str, Any]:
        snap = snap or self.service.snapshot()  # the version reported is the one searched
        results = self.service.search(app_name, user_id, query, top_k, filters, mode,
                                      query_vec=query_vec, snap=snap)
        return {"memories": [r.to_dict() for r in results], "store_version": snap.version}

    def op_add_session(self, app_name: str, user_id: str,
                       session: Session | Mapping[str, Any]) -> dict[str, Any]:
        session_hash = None
        if not isinstance(session, Session):
            raw = dict(session)
            for name, value in (("app_name", app_name), ("user_id", user_id)):
                if raw.get(name) is None:
                    raw[name] = value
                elif raw[name] != value:
                    raise SessionError(f"{raw[name]!r} does not match {name} {value!r} of "
                                       f"the request", field=f"session.{name}")
            try:
                session = Session.from_dict(raw)
            except MnemorayError as exc:
                raise exc.within("session") from exc
            # Idempotency by content: the dict as posted, not the parsed session (parsing
            # fills missing timestamps with "now"), so posting it again stores nothing.
            session_hash = session_content_hash(raw)
        elif session.key[:2] != (app_name, user_id):
            raise SessionError("belongs to another app or user", field="session")
        done = self.service.ingest_session(session, session_hash=session_hash)
        return {"added": len(done.added), "duplicates": done.duplicates, "status": done.status,
                "memories": [memory_out(m) for m in done.added]}

    def op_add_memories(self, app_name: str, user_id: str,
                        memories: Sequence[Mapping[str, Any]],
                        actor: str = "") -> dict[str, Any]:
        records = []
        for i, raw in enumerate(memories):
            fields = {"session_id": "online", "kind": "fact",
                      **{k: v for k, v in raw.items() if v is not None}}
            try:
                records.append(Memory.from_dict({**fields, "app_name": app_name,
                                                 "user_id": user_id}))
            except MnemorayError as exc:
                raise exc.within(f"memories[{i}]") from exc
        added = self.service.add_memories(records, actor=actor)
        return {"added": len(added), "duplicates": len(records) - len(added),
                "status": "added" if added else "unchanged",
                "memories": [memory_out(m) for m in added]}

    def op_list_memories(self, app_name: str, user_id: str, cursor: str | None = None,
                         limit: int = 50) -> dict[str, Any]:
        after = decode_cursor(cursor) if cursor else None
        page, more = self.service.list_memories(app_name, user_id, after, limit)
        return {"memories": [memory_out(m) for m in page],
                "next_cursor": encode_cursor(page[-1].created_at, page[-1].memory_id)
                if more and page else None}

    def op_forget_memory(self, app_name: str, user_id: str, memory_id: str,
                         reason: str = "", actor: str = "") -> int:
        return self.service.forget_memory(app_name, user_id, memory_id, reason=reason,
                                          actor=actor)

    def op_forget_session(self, app_name: str, user_id: str, session_id: str,
                          reason: str = "", actor: str = "") -> int:
        return self.service.forget_session(app_name, user_id, session_id, reason=reason,
                                           actor=actor)

    def op_forget_user(self, app_name: str, user_id: str, reason: str = "",
                       actor: str = "") -> int:
        return self.service.forget_user(app_name, user_id, reason=reason, actor=actor)

    def op_forgotten(self, app_name: str, user_id: str) -> dict[str, Any]:
        return {"records": self.service.forgotten(app_name, user_id)}

    def op_edit_memory(self, app_name: str, user_id: str, memory_id: str, text: str,
                       actor: str = "") -> dict[str, Any]:
        new = self.service.edit_memory(app_name, user_id, memory_id, text, actor=actor)
        return {"memory": memory_out(new), "replaced": memory_id}

    def op_memory_versions(self, app_name: str, user_id: str,
                           memory_id: str) -> dict[str, Any]:
        return self.service.memory_versions(app_name, user_id, memory_id)

    def op_forget_by_query(self, app_name: str, user_id: str, *, dry_run: bool,
                           query: str | None = None, top_k: int = 10,
                           mode: str | None = None, filters: Mapping[str, Any] | None = None,
                           confirm: str | None = None, memory_ids: Sequence[str] | None = None,
                           reason: str = "", actor: str = "") -> dict[str, Any]:
        """``dry_run``: the preview (nothing forgotten); else the confirm step."""
        if dry_run:
            if query is None:
                raise InvalidInput("required with dry_run", field="query")
            if confirm is not None or memory_ids is not None:
                raise InvalidInput("not with dry_run: preview first, then confirm",
                                   field="confirm" if confirm is not None else "memory_ids")
            return self.service.preview_forget(app_name, user_id, query, top_k=top_k,
                                               filters=filters, mode=mode).to_dict()
        if confirm is None:
            raise InvalidInput("required; preview with dry_run: true first to get a "
                               "confirm_token", field="confirm")
        if query is not None:
            raise InvalidInput("the confirm step forgets what the preview listed; pass only "
                               "confirm (and optionally memory_ids)", field="query")
        return self.service.confirm_forget(app_name, user_id, confirm, memory_ids=memory_ids,
                                           reason=reason, actor=actor)

    def op_stats(self, app_name: str = "", user_id: str = "") -> dict[str, Any]:
        return self.service.stats()


def attach_webhook(service: MemoryService, hooks: Any) -> Webhook | None:
    """Post the service's lifecycle events to ``hooks.webhook_url`` (Serve's ``hooks``
    settings group), off the request path; None when no URL is set."""
    if not getattr(hooks, "webhook_url", None):
        return None
    return Webhook(hooks.webhook_url, timeout_s=hooks.webhook_timeout_s).attach(
        service.hooks, hooks.webhook_events)


# -- remote models behind the core interfaces ----------------------------------------------
def call_on_loop(loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[Any]],
                 timeout_s: float | None) -> Any:
    """Run ``await make()`` on the replica's event loop from a worker thread, blocking.

    Deployment handles are awaited on the loop they belong to: a sync ``.result()``
    is not available when Serve runs the router on the replica's own loop
    (``RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0``), and this works either way.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError("a blocking model call on the event loop would deadlock; call it "
                           "from a worker thread")

    async def run() -> Any:
        return await make()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout_s)


class RemoteEmbedder(Embedder):
    """The ``Embedder`` deployment as a core :class:`Embedder`. ``encode`` blocks, so it
    runs in worker threads (the write path does); the calls themselves are awaited on
    ``loop``. Large inputs fan out in chunks of ``chunk`` texts."""

    def __init__(self, handle: Any, model_id: str, dim: int, loop: asyncio.AbstractEventLoop,
                 *, chunk: int = 128, timeout_s: float = 300.0) -> None:
        self._handle = handle
        self._loop = loop
        self.model_id = model_id
        self.dim = dim
        self.chunk = chunk
        self.timeout_s = timeout_s

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        chunks = [texts[i:i + self.chunk] for i in range(0, len(texts), self.chunk)]

        async def fan_out() -> list[Any]:
            return list(await asyncio.gather(*(self._handle.encode.remote(c)
                                               for c in chunks)))

        parts = call_on_loop(self._loop, fan_out, self.timeout_s)
        return np.concatenate([np.asarray(p, dtype=np.float32) for p in parts])


class RemoteSummarizer(Summarizer):
    """The ``Summarizer`` deployment as a core :class:`Summarizer` (blocking, like
    :class:`RemoteEmbedder`)."""

    def __init__(self, handle: Any, name: str, loop: asyncio.AbstractEventLoop, *,
                 timeout_s: float = 600.0) -> None:
        self._handle = handle
        self._loop = loop
        self.name = name
        self.timeout_s = timeout_s

    prompt: str | None = None  # passed to the deployment's summarizer (with_prompt)

    def with_prompt(self, prompt: str | None) -> RemoteSummarizer:
        if prompt == self.prompt:
            return self
        clone = copy.copy(self)
        clone.prompt = prompt
        return clone

    def summarize(self, events: Sequence[Event]) -> Summary:
        return call_on_loop(
            self._loop, lambda: self._handle.summarize.remote(list(events), self.prompt),
            self.timeout_s)

    def summarize_many(self, batches: Sequence[Sequence[Event]]) -> list[Summary]:
        return call_on_loop(
            self._loop, lambda: self._handle.summarize_many.remote([list(b) for b in batches],
                                                                   self.prompt),
            self.timeout_s)
