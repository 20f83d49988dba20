"""Profiles and domain indexes as derived views of a snapshot, and the service's reads.

A view is computed on first read and kept with the snapshot it was computed from
(a weak reference: it goes when the snapshot does), so a read after any commit (a
backfill on either engine, an online ingestion, a forget) computes it afresh from
that version, and one snapshot never computes a user's profile twice. A memory that
expires (TTL) ends a view too: it is computed again after the first expiry among
the memories it read.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mnemoray.compiler.services import ProfileSource
from mnemoray.errors import NotFound, Unavailable
from mnemoray.memory.snapshot import StoreSnapshot
from mnemoray.profiles.domain import DomainIndex, DomainPart, domain_index, with_memories
from mnemoray.profiles.profile import UserProfile, UserTopics, build_profile

T = TypeVar("T")
KEEP_VIEWS = 256  # views kept per snapshot (a user's profile, an app's index)

_lock = threading.Lock()
_views: weakref.WeakKeyDictionary[StoreSnapshot, OrderedDict[tuple[str, ...],
                                                             tuple[Any, float]]] = \
    weakref.WeakKeyDictionary()


def _memo(snap: StoreSnapshot, key: tuple[str, ...],
          build: Callable[[], tuple[T, float]]) -> T:
    now = time.time()
    with _lock:
        kept = _views.setdefault(snap, OrderedDict())
        found = kept.get(key)
        if found is not None and now < found[1]:
            kept.move_to_end(key)
            return found[0]  # type: ignore[no-any-return]
    value, until = build()
    with _lock:
        kept = _views.setdefault(snap, OrderedDict())
        kept[key] = (value, until)
        while len(kept) > KEEP_VIEWS:
            kept.popitem(last=False)
    return value


def user_view(snap: StoreSnapshot, app: str, user: str) -> tuple[UserProfile, UserTopics]:
    """The profile of (app, user) in ``snap`` and what the user gives the domain index."""
    def build() -> tuple[tuple[UserProfile, UserTopics], float]:
        profile, topics, until = build_profile(snap, app, user)
        return (profile, topics), until
    return _memo(snap, ("user", app, user), build)


def users_of(snap: StoreSnapshot, app: str) -> dict[str, UserTopics]:
    """User -> topics of every user of ``app`` with live memories in ``snap``'s shards."""
    out = {}
    for owner, user in snap.tenants():
        if owner == app:
            topics = user_view(snap, app, user)[1]
            if topics.memories:
                out[user] = topics
    return out


def app_domain(snap: StoreSnapshot, app: str) -> DomainIndex:
    def build() -> tuple[DomainIndex, float]:
        part = users_of(snap, app)
        # Ends when the first of its users' views does (a memory expiring).
        until = min((_views.get(snap, {}).get(("user", app, u), (None, math.inf))[1]
                     for u in part), default=math.inf)
        return domain_index(app, snap.version, part), until
    return _memo(snap, ("domain", app), build)


def profile_over(memory_op: Callable[..., Any]) -> ProfileSource:
    """A ``Services(user_profile=...)`` hook over a server's memory operations
    (``memory_op(op, app_name, user_id)``: the replica holding the user's shard answers);
    None when the user has no memories yet."""
    def source(app_name: str, user_id: str) -> Mapping[str, Any] | None:
        try:
            return memory_op("profile", app_name, user_id)  # type: ignore[no-any-return]
        except NotFound:
            return None
    return source


class ProfileReads:
    """The profile and domain reads of :class:`~mnemoray.memory.service.MemoryService`
    (a mixin: it needs ``snapshot()`` and ``store``)."""

    def profile(self, app_name: str, user_id: str) -> UserProfile:
        """The user's profile at the current store version (NotFound: no memories)."""
        found = user_view(self.snapshot(), app_name, user_id)[0]  # type: ignore[attr-defined]
        if not found.memories:
            raise NotFound(f"{app_name}/{user_id} has no memories: nothing to profile",
                           field="user_id")
        return found

    def domain_part(self, app_name: str) -> DomainPart:
        """This replica's share of the app's domain index (every user in its shards)."""
        snap = self.snapshot()  # type: ignore[attr-defined]
        return DomainPart(snap.version, users_of(snap, app_name))

    def domain(self, app_name: str) -> DomainIndex:
        """The app's domain index at the current store version (NotFound: no memories).
        Reads across the app's users: the caller decides who may (an app-wide key)."""
        if getattr(self.store, "load_shards", None) is not None:  # type: ignore[attr-defined]
            # An Index replica holds some shards: ask each for its part and merge them.
            raise Unavailable("the domain index needs every shard: ask each shard's "
                              "replica for its domain_part and merge them")
        return with_memories(app_domain(self.snapshot(), app_name))  # type: ignore[attr-defined]

    def profile_source(self) -> ProfileSource:
        """A ``Services(user_profile=...)`` hook: the profile as JSON, None when the
        user has no memories yet."""
        def source(app_name: str, user_id: str) -> Mapping[str, Any] | None:
            found = user_view(self.snapshot(), app_name, user_id)[0]  # type: ignore[attr-defined]
            return found.to_dict() if found.memories else None
        return source


__all__ = ["ProfileReads", "ProfileSource", "app_domain", "profile_over", "user_view",
           "users_of"]
