"""Forget, correct and hooks of :class:`~mnemoray.memory.service.service.MemoryService`.

A part of the service (``service.lifecycle``) over its store, snapshot, write lock and
hook registry: every forget names its owner, keeps a ``reason`` and an ``actor`` on its
tombstones, and tells ``on_memory_forgotten`` hooks which memories went. Corrections
(:mod:`~mnemoray.memory.records.edit`) and forget by query
(:mod:`~mnemoray.memory.service.forget_query`) are built on the same steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from mnemoray.embedders import Embedder
from mnemoray.errors import Conflict, InvalidInput, NotFound
from mnemoray.limits import MAX_FORGET_PREVIEW
from mnemoray.memory.recall.result import RecallResult
from mnemoray.memory.records import edit
from mnemoray.memory.records.filters import RecallFilters
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service import forget_query
from mnemoray.memory.service.hooks import Hook, MemoryEvent, MemoryHooks, memory_events
from mnemoray.memory.store.protocol import MemoryBackend
from mnemoray.memory.store.reload import SnapshotReloader
from mnemoray.memory.store.scopes import ScopePolicy, refuse_foreign
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.memory.store.tombstones import drop_history, forget_records


class LifecycleHost(Protocol):
    """What the lifecycle reads of its service (the ``MemoryService``)."""

    store: MemoryBackend
    embedder: Embedder | None
    hooks: MemoryHooks
    reloader: SnapshotReloader
    scopes: ScopePolicy
    _write_lock: threading.Lock

    def snapshot(self) -> StoreSnapshot: ...

    def search(self, *args: Any, **kwargs: Any) -> list[RecallResult]: ...

    def forget_memories(
        self,
        app_name: str,
        user_id: str,
        memory_ids: Sequence[str],
        *,
        reason: str = "",
        actor: str = "",
        scope: str = "memory",
    ) -> int: ...

    def _write(self, *args: Any, **kwargs: Any) -> list[Memory]: ...


class MemoryLifecycle:
    """Forget (by memory, session, user), corrections and hook registration of one
    service. Everything is read through the service at call time: a server sets its
    ``scopes`` (and may swap other parts) after construction."""

    def __init__(self, service: LifecycleHost) -> None:
        self.service = service

    @property
    def store(self) -> MemoryBackend:
        return self.service.store

    @property
    def hooks(self) -> MemoryHooks:
        return self.service.hooks

    @property
    def reloader(self) -> SnapshotReloader:
        return self.service.reloader

    @property
    def scopes(self) -> ScopePolicy:
        return self.service.scopes

    @property
    def _write_lock(self) -> threading.Lock:
        return self.service._write_lock

    def snapshot(self) -> StoreSnapshot:
        return self.service.snapshot()

    # -- lifecycle hooks (delivered off the caller's path: see mnemoray.memory.service.hooks) -----
    def on_memory_created(self, fn: Hook) -> Hook:
        return self.hooks.on_memory_created(fn)

    def on_memory_recalled(self, fn: Hook) -> Hook:
        return self.hooks.on_memory_recalled(fn)

    def on_memory_forgotten(self, fn: Hook) -> Hook:
        return self.hooks.on_memory_forgotten(fn)

    # -- forgetting ---------------------------------------------------------------
    def forget_memory(
        self, app_name: str, user_id: str, memory_id: str, *, reason: str = "", actor: str = ""
    ) -> int:
        """Forget one memory of this user; 0 when the user has no such live memory
        (another user's memory with the same id is never touched). ``reason`` and
        ``actor`` are kept on the tombstone (:meth:`forgotten`) and told to hooks.
        A memory another app shares with this one is refused (:class:`NotOwner`)."""
        n = self.service.forget_memories(app_name, user_id, [memory_id], reason=reason, actor=actor)
        if not n:
            refuse_foreign(self.snapshot(), self.scopes, app_name, user_id, memory_id, "forget")
        return n

    def forget_memories(
        self,
        app_name: str,
        user_id: str,
        memory_ids: Sequence[str],
        *,
        reason: str = "",
        actor: str = "",
        scope: str = "memory",
    ) -> int:
        """Forget these memories of this user in one commit; how many were live.
        ``scope``: what hooks are told the forget was by ("memory", "query", ...)."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return 0
        return self._forget(
            app_name, user_id, None, scope, reason, actor, memory_ids=ids, owner=(app_name, user_id)
        )

    def forget_session(
        self, app_name: str, user_id: str, session_id: str, *, reason: str = "", actor: str = ""
    ) -> int:
        """Forget a session's memories (and cancel its queued ingestion: see
        :meth:`MemoryHooks.before_erase`)."""
        self.hooks.guard_erase(app_name, user_id, session_id)
        return self._forget(
            app_name,
            user_id,
            lambda m: m.session_id == session_id,
            "session",
            reason,
            actor,
            session=(app_name, user_id, session_id),
        )

    def forget_user(self, app_name: str, user_id: str, *, reason: str = "", actor: str = "") -> int:
        """Forget every memory of the user (and cancel their queued ingestion); the
        records of their earlier forgets that a compaction archived go too."""
        self.hooks.guard_erase(app_name, user_id, None)
        n = self._forget(
            app_name, user_id, lambda m: True, "user", reason, actor, user=(app_name, user_id)
        )
        drop_history(self.store.root, app_name, user_id)
        return n

    def forgotten(self, app_name: str, user_id: str) -> list[dict[str, Any]]:
        """This user's forget records, oldest first: scope, ids, ``reason``, ``actor``,
        ``at``. Those a compaction retired stay listed when they carry a reason or an
        actor (:func:`~mnemoray.memory.store.tombstones.archive_retired`)."""
        records = forget_records(self.store.root, self.snapshot().tombstones, app_name, user_id)
        return [
            {k: v for k, v in t.to_dict().items() if k not in ("app_name", "user_id")}
            for t in records
        ]

    def _forget(
        self,
        app_name: str,
        user_id: str,
        hit: Callable[[Memory], bool] | None,
        scope: str,
        reason: str,
        actor: str,
        **what: Any,
    ) -> int:
        """``hit``: which of the user's rows the forget covers (None: the ``memory_ids``)."""
        owner = (app_name, user_id)
        with self._write_lock:
            told = self.hooks.wants("on_memory_forgotten")
            before: list[Memory] = []
            if told:  # only then are the rows read, to name what went
                self.reloader.refresh()
                snap = self.snapshot()
                if hit is None:
                    before = [
                        m for i in what["memory_ids"] if (m := snap.get(i, owner)) is not None
                    ]
                else:
                    before = [m for m in snap.rows_for_user(app_name, user_id) if hit(m)]
            try:
                n = self.store.forget(**what, reason=reason, actor=actor)
            finally:
                self.reloader.refresh()
            events: list[MemoryEvent] = []
            if n and told:
                snap = self.snapshot()
                gone = [m for m in before if snap.get(m.memory_id, owner) is None]
                events = memory_events(
                    "on_memory_forgotten", gone, reason=reason, actor=actor, scope=scope
                )
        self._tell_forgotten(events)
        return n

    def _tell_forgotten(self, events: Sequence[MemoryEvent]) -> None:
        """Queue the events for the hooks, then run the synchronous ones (out of the write
        lock: a cascade forgets in turn)."""
        for event in events:
            self.hooks.emit(event)
            self.hooks.deliver_sync(event)

    # -- corrections -------------------------------------------------------------
    def edit_memory(
        self, app_name: str, user_id: str, memory_id: str, text: str, *, actor: str = ""
    ) -> Memory:
        """Replace the text of this user's memory ``memory_id``; the corrected record
        (new id, re-embedded, ``previous_versions``, ``edited_by`` = ``actor``). The same
        text again changes nothing; the same edit retried returns its record. NotFound
        when the user has no such live memory; Conflict when another writer forgot or
        corrected it meanwhile (this edit is then taken back)."""
        text = edit.check_text(text)
        owner = (app_name, user_id)
        # The new text's vector depends on the text alone: embedded before the write lock.
        embedder = self.service.embedder
        vector = embedder.encode([text])[0] if embedder is not None else None
        with self._write_lock:
            self.reloader.refresh()
            snap = self.snapshot()
            old = snap.get(memory_id, owner)
            rows = snap.rows_for_user(app_name, user_id)
            if old is None:  # this very edit may have happened already (a retried call)
                done = [m for m in edit.edits_of(rows, memory_id) if m.text == text]
                if done:
                    return done[0]
                refuse_foreign(snap, self.scopes, app_name, user_id, memory_id, "edit")
                raise NotFound(f"no memory {memory_id!r} for this user", field="memory_id")
            if text == old.text:
                return old
            new = edit.edited(old, text, actor, time.time())
            if vector is not None:
                new = new.with_embedding(vector)
            earlier = edit.edits_of(rows, old.memory_id)  # a half-done edit of this version
            same = next((m for m in earlier if m.content_hash == new.content_hash), None)
            n = 0
            try:
                written = (
                    [] if same else self.service._write([new], [], index_kind="flat", actor=actor)
                )
                result = same or (written[0] if written else new)
                why = f"{edit.EDITED}: now {result.memory_id}"
                stale = [m.memory_id for m in earlier if m is not same]
                if stale:  # an interrupted edit to other words: this one replaces it
                    self.store.forget(memory_ids=stale, owner=owner, reason=why, actor=actor)
                n = self.store.forget(
                    memory_ids=[old.memory_id], owner=owner, reason=why, actor=actor
                )
                if n == 0 and written:  # another writer forgot or replaced it first
                    self.store.forget(
                        memory_ids=[result.memory_id],
                        owner=owner,
                        reason=edit.EDIT_LOST,
                        actor=actor,
                    )
                    raise Conflict(
                        f"memory {memory_id!r} was changed or forgotten by "
                        f"another request meanwhile; read it again",
                        field="memory_id",
                    )
            finally:
                self.reloader.refresh()
        if n:
            self._tell_forgotten(
                [
                    MemoryEvent(
                        "on_memory_forgotten",
                        app_name,
                        user_id,
                        (old.memory_id,),
                        memories=(old,),
                        reason=edit.EDITED,
                        actor=actor,
                        scope="memory",
                    )
                ]
            )
        return result

    def memory_versions(
        self,
        app_name: str,
        user_id: str,
        memory_id: str,
    ) -> dict[str, Any]:
        """Every text of this user's memory ``memory_id`` (current or earlier id),
        oldest first: ``{"memory_id": current id, "versions": [...]}``."""
        rows = self.snapshot().rows_for_user(app_name, user_id)
        return edit.versions_out(edit.find_versions(rows, memory_id))

    # -- forget by query -----------------------------------------------------------
    def preview_forget(
        self,
        app_name: str,
        user_id: str,
        query: str,
        *,
        top_k: int = 10,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        mode: str | None = None,
        ttl_s: float = forget_query.TOKEN_TTL_S,
    ) -> forget_query.ForgetPreview:
        """What a forget by ``query`` would remove (nothing is removed), and the token
        :meth:`confirm_forget` takes to remove exactly that."""
        if not isinstance(top_k, int) or not 1 <= top_k <= MAX_FORGET_PREVIEW:
            raise InvalidInput(f"must be 1..{MAX_FORGET_PREVIEW}, got {top_k!r}", field="top_k")
        # Only this app's own memories: what another app shares is not this app's to forget.
        results = self.service.search(
            app_name, user_id, query, top_k, filters, mode, recalled=False, shared=False
        )
        expires = time.time() + ttl_s
        ids = [r.memory.memory_id for r in results]
        token = forget_query.seal(
            forget_query.token_key(self.store.root), app_name, user_id, query, ids, expires
        )
        return forget_query.ForgetPreview(app_name, user_id, query, results, token, expires)

    def confirm_forget(
        self,
        app_name: str,
        user_id: str,
        confirm: str,
        *,
        memory_ids: Sequence[str] | None = None,
        reason: str = "",
        actor: str = "",
    ) -> dict[str, Any]:
        """Forget what the preview behind ``confirm`` listed (or the subset
        ``memory_ids`` of it), nothing else: ``{"forgotten", "memory_ids"}``."""
        raw = forget_query.unseal(
            forget_query.token_key(self.store.root), confirm, app_name, user_id
        )
        ids = forget_query.pick(raw["ids"], memory_ids)
        # Never the query as the reason: it is the very text the user wants gone.
        n = (
            self.service.forget_memories(
                app_name,
                user_id,
                ids,
                scope="query",
                actor=actor,
                reason=reason or forget_query.FORGOTTEN_BY_QUERY,
            )
            if ids
            else 0
        )
        return {"forgotten": n, "memory_ids": ids}
