"""The memory service as JSON operations: the one layer every edge (HTTP, the ``Index``
deployment, the MCP server) uses to turn requests into ``MemoryService`` calls and
answers back into JSON, so an answer has one shape wherever it is served.

``MemoryOps.call(op, app, user, kwargs)`` dispatches by name, which is how the ``Index``
deployment forwards operations to the replica holding a shard.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mnemoray.embedders import ModelMismatch
from mnemoray.errors import InvalidInput, MnemorayError, StoreCorrupt, Unavailable
from mnemoray.memory.recall.request import RecallRequest, same_scope
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service import app_recall
from mnemoray.memory.service.service import MemoryService
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.writes import session_content_hash
from mnemoray.profiles.domain import DomainPart
from mnemoray.sessions.session import Session, SessionError

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
        raise InvalidInput(
            "malformed; pass the next_cursor of the previous page", field="cursor"
        ) from exc


class MemoryOps:
    """The HTTP API's memory operations over one ``MemoryService``, JSON in and out.

    Operations are ``op_<name>(app_name, user_id, **kwargs)``; every one is scoped
    to that (app, user), and the service enforces the same scope below.
    """

    OPS = frozenset(
        {
            "recall",
            "add_session",
            "add_memories",
            "list_memories",
            "forget_memory",
            "forget_session",
            "forget_user",
            "stats",
            "forgotten",
            "edit_memory",
            "memory_versions",
            "forget_by_query",
            "recall_app",
            "app_candidates",
            "graph",
            "profile",
            "domain",
            "domain_part",
        }
    )

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def call(
        self, op: str, app_name: str, user_id: str, kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        if op not in self.OPS:
            # The ingress picks the op, never a client: an unknown one is a bug (500).
            raise ValueError(f"unknown memory operation {op!r}")
        try:
            return getattr(self, f"op_{op}")(app_name, user_id, **dict(kwargs or {}))
        except ModelMismatch as exc:
            # The server's models are its configuration, checked against the store at start:
            # a mismatch now (the manifest changed under it) is never the client's fault.
            raise StoreCorrupt(str(exc)) from exc

    def op_recall(
        self,
        app_name: str,
        user_id: str,
        query: str = "",
        query_vec: np.ndarray | None = None,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        snap: StoreSnapshot | None = None,
        explain: bool = False,
        *,
        request: RecallRequest | None = None,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        """``explain``: each result with ``contributions`` (what each signal added).
        ``request``: the recall already resolved at the edge (the loose arguments then
        unused); it must be of this op's (app, user)."""
        if request is None:
            request = self.service.resolve(
                app_name,
                user_id,
                query,
                top_k,
                filters,
                mode,
                explain=explain,
                budget_tokens=budget_tokens,
            )
        else:
            same_scope(request, app_name, user_id)
        return self.recall(request, query_vec, snap)

    def recall(
        self,
        request: RecallRequest,
        query_vec: np.ndarray | None = None,
        snap: StoreSnapshot | None = None,
    ) -> dict[str, Any]:
        """A resolved one-user recall as JSON (the edges that resolved it call this)."""
        snap = snap or self.service.snapshot()  # the version reported is the one searched
        results = self.service.recall(request, query_vec=query_vec, snap=snap)
        return {
            "memories": [r.to_dict(request.explain) for r in results],
            "store_version": snap.version,
        }

    def op_recall_app(
        self,
        app_name: str,
        user_id: str,
        query: str = "",
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        *,
        request: RecallRequest | None = None,
    ) -> dict[str, Any]:
        """Across all users of ``app_name`` (``user_id`` unused): each result names its
        user. The caller decides who may (mnemoray.http.auth: app-wide keys only)."""
        if self.service.store.load_shards is not None:
            # An Index replica holds some shards: its answer alone would miss users (the
            # ingress asks every shard for app_candidates instead:
            # mnemoray.memory.service.app_recall).
            raise Unavailable(
                "app-wide recall needs every shard: ask each shard's replica "
                "for app_candidates and rank them together"
            )
        request = self._app_request(app_name, query, top_k, filters, mode, request)
        snap = self.service.snapshot()
        results = self.service.recall(request, snap=snap)
        return app_recall.answer(results, snap.version)

    def op_app_candidates(
        self,
        app_name: str,
        user_id: str,
        query: str = "",
        query_vec: np.ndarray | None = None,
        top_k: int = 5,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        *,
        request: RecallRequest | None = None,
    ) -> app_recall.AppProposal:
        """This replica's share of an app-wide recall (``user_id`` unused)."""
        request = self._app_request(app_name, query, top_k, filters, mode, request)
        return app_recall.propose(self.service, request, query_vec)

    def _app_request(
        self,
        app_name: str,
        query: str,
        top_k: int,
        filters: RecallFilters | Mapping[str, Any] | None,
        mode: str | None,
        request: RecallRequest | None,
    ) -> RecallRequest:
        if request is None:
            return self.service.resolve(app_name, None, query, top_k, filters, mode)
        same_scope(request, app_name, None)
        return request

    def op_add_session(
        self,
        app_name: str,
        user_id: str,
        session: Session | Mapping[str, Any],
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        session_hash = None
        if not isinstance(session, Session):
            raw = dict(session)
            for name, value in (("app_name", app_name), ("user_id", user_id)):
                if raw.get(name) is None:
                    raw[name] = value
                elif raw[name] != value:
                    raise SessionError(
                        f"{raw[name]!r} does not match {name} {value!r} of the request",
                        field=f"session.{name}",
                    )
            try:
                session = Session.from_dict(raw)
            except MnemorayError as exc:
                raise exc.within("session") from exc
            # Idempotency by content: the dict as posted, not the parsed session (parsing
            # fills missing timestamps with "now"), so posting it again stores nothing.
            session_hash = session_content_hash(raw)
        elif session.key[:2] != (app_name, user_id):
            raise SessionError("belongs to another app or user", field="session")
        done = self.service.ingest_session(
            session, session_hash=session_hash, agent_name=agent_name
        )
        return {
            "added": len(done.added),
            "duplicates": done.duplicates,
            "status": done.status,
            "memories": [memory_out(m) for m in done.added],
        }

    def op_add_memories(
        self,
        app_name: str,
        user_id: str,
        memories: Sequence[Mapping[str, Any]],
        actor: str = "",
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """``agent_name``: the owner of the memories that name none (None: shared)."""
        records = []
        for i, raw in enumerate(memories):
            fields = {
                "session_id": "online",
                "kind": "fact",
                **({"agent_name": agent_name} if agent_name else {}),
                **{k: v for k, v in raw.items() if v is not None},
            }
            try:
                records.append(
                    Memory.from_dict({**fields, "app_name": app_name, "user_id": user_id})
                )
            except MnemorayError as exc:
                raise exc.within(f"memories[{i}]") from exc
        added = self.service.add_memories(records, actor=actor)
        return {
            "added": len(added),
            "duplicates": len(records) - len(added),
            "status": "added" if added else "unchanged",
            "memories": [memory_out(m) for m in added],
        }

    def op_list_memories(
        self,
        app_name: str,
        user_id: str,
        cursor: str | None = None,
        limit: int = 50,
        kind: str | None = None,
        session_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> dict[str, Any]:
        after = decode_cursor(cursor) if cursor else None
        page, more = self.service.list_memories(
            app_name,
            user_id,
            after,
            limit,
            kind=kind,
            session_id=session_id,
            since=since,
            until=until,
        )
        return {
            "memories": [memory_out(m) for m in page],
            "next_cursor": encode_cursor(page[-1].created_at, page[-1].memory_id)
            if more and page
            else None,
        }

    def op_forget_memory(
        self, app_name: str, user_id: str, memory_id: str, reason: str = "", actor: str = ""
    ) -> int:
        return self.service.forget_memory(app_name, user_id, memory_id, reason=reason, actor=actor)

    def op_forget_session(
        self, app_name: str, user_id: str, session_id: str, reason: str = "", actor: str = ""
    ) -> int:
        return self.service.forget_session(
            app_name, user_id, session_id, reason=reason, actor=actor
        )

    def op_forget_user(self, app_name: str, user_id: str, reason: str = "", actor: str = "") -> int:
        return self.service.forget_user(app_name, user_id, reason=reason, actor=actor)

    def op_forgotten(self, app_name: str, user_id: str) -> dict[str, Any]:
        return {"records": self.service.forgotten(app_name, user_id)}

    def op_edit_memory(
        self, app_name: str, user_id: str, memory_id: str, text: str, actor: str = ""
    ) -> dict[str, Any]:
        new = self.service.edit_memory(app_name, user_id, memory_id, text, actor=actor)
        return {"memory": memory_out(new), "replaced": memory_id}

    def op_memory_versions(self, app_name: str, user_id: str, memory_id: str) -> dict[str, Any]:
        return self.service.memory_versions(app_name, user_id, memory_id)

    def op_forget_by_query(
        self,
        app_name: str,
        user_id: str,
        *,
        dry_run: bool,
        query: str | None = None,
        top_k: int = 10,
        mode: str | None = None,
        filters: Mapping[str, Any] | None = None,
        confirm: str | None = None,
        memory_ids: Sequence[str] | None = None,
        reason: str = "",
        actor: str = "",
    ) -> dict[str, Any]:
        """``dry_run``: the preview (nothing forgotten); else the confirm step."""
        if dry_run:
            if query is None:
                raise InvalidInput("required with dry_run", field="query")
            if confirm is not None or memory_ids is not None:
                raise InvalidInput(
                    "not with dry_run: preview first, then confirm",
                    field="confirm" if confirm is not None else "memory_ids",
                )
            return self.service.preview_forget(
                app_name, user_id, query, top_k=top_k, filters=filters, mode=mode
            ).to_dict()
        if confirm is None:
            raise InvalidInput(
                "required; preview with dry_run: true first to get a confirm_token", field="confirm"
            )
        if query is not None:
            raise InvalidInput(
                "the confirm step forgets what the preview listed; pass only "
                "confirm (and optionally memory_ids)",
                field="query",
            )
        return self.service.confirm_forget(
            app_name, user_id, confirm, memory_ids=memory_ids, reason=reason, actor=actor
        )

    def op_graph(
        self,
        app_name: str,
        user_id: str,
        entity: str,
        depth: int = 2,
        types: Sequence[str] | None = None,
        at: float | str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """The user's entity graph around ``entity`` (``MemoryService.neighbours``)."""
        return self.service.neighbours(app_name, user_id, entity, depth, types, at, limit).to_dict()

    def op_profile(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's profile (``MemoryService.profile``)."""
        return self.service.profile(app_name, user_id).to_dict()

    def op_domain(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The app's domain index (``user_id`` unused; the caller checks the key)."""
        return self.service.domain(app_name).to_dict()

    def op_domain_part(self, app_name: str, user_id: str) -> DomainPart:
        """This replica's share of the app's domain index (``user_id`` unused)."""
        return self.service.domain_part(app_name)

    def op_stats(self, app_name: str = "", user_id: str = "") -> dict[str, Any]:
        return self.service.stats()
