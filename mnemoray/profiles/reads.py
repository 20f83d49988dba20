"""Profiles and domain indexes as derived views of a snapshot, and the service's reads.

A view is computed on first read and kept with the snapshot it was computed from
(a weak reference: it goes when the snapshot does), so a read after any commit (a
backfill on either engine, an online ingestion, a forget) reads that version, and
one snapshot never computes a view twice. A memory that expires (TTL) ends a view
too: it is computed again after the first expiry among the memories it read.

A user's profile is a function of their live memories, so it is also kept by their
identity (the user's live memory ids): after a commit, only the users whose memories
changed are computed again (a new session of one user leaves the others' profiles,
and most of the app's domain index, as they were). That holds up to
:data:`KEEP_USERS` users in the process: past it, a domain read goes through the
users in turn and each one pushes out a profile a later one needs, so every domain
read after a commit computes every user again.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from mnemoray.compiler.services import ProfileSource
from mnemoray.errors import NotFound, Unavailable
from mnemoray.memory.recall.inputs import user_graph
from mnemoray.memory.store.snapshot import StoreSnapshot
from mnemoray.profiles.domain import DomainIndex, DomainPart, domain_index, with_memories
from mnemoray.profiles.profile import UserProfile, UserTopics, build_profile, shared_rows

T = TypeVar("T")
KEEP_VIEWS = 256  # views kept per snapshot (a user's profile, an app's index)
# Profiles kept by the live memories they were computed from, over every app and store
# of the process. A fixed bound: each holds the user's topic counts, and keeping every
# user of a large app would keep them all in memory for good.
KEEP_USERS = 4096
UserView = tuple[UserProfile, UserTopics, float]  # and when it stops holding

_lock = threading.Lock()
_views: weakref.WeakKeyDictionary[
    StoreSnapshot, OrderedDict[tuple[str, ...], tuple[Any, float]]
] = weakref.WeakKeyDictionary()
_by_content: OrderedDict[tuple[Any, ...], UserView] = OrderedDict()


def _memo(snap: StoreSnapshot, key: tuple[str, ...], build: Callable[[], tuple[T, float]]) -> T:
    now = time.time()
    with _lock:
        kept = _views.setdefault(snap, OrderedDict())
        found = kept.get(key)
        if found is not None and now < found[1]:
            kept.move_to_end(key)
            return found[0]
    value, until = build()
    with _lock:
        kept = _views.setdefault(snap, OrderedDict())
        kept[key] = (value, until)
        while len(kept) > KEEP_VIEWS:
            kept.popitem(last=False)
    return value


def _computed(snap: StoreSnapshot, app: str, user: str) -> UserView:
    """The user's view at ``snap``: the one computed from the same live memories
    (in any earlier version), else computed now."""
    memories = shared_rows(snap, app, user)
    digest = hashlib.blake2b(digest_size=16)
    for memory_id in sorted(m.memory_id for m in memories):
        digest.update(memory_id.encode("utf-8", "surrogatepass") + b"\x1f")
    # The user's graph needs no place in the key: it is written and forgotten in the
    # same commits as the memories it was read from.
    key = (app, user, getattr(snap, "graph", None) is not None, digest.hexdigest())
    with _lock:
        found = _by_content.get(key)
        if found is not None and time.time() < found[2]:
            _by_content.move_to_end(key)
    if found is None or time.time() >= found[2]:
        found = build_profile(snap, app, user, memories)
        # Read past a damaged graph shard, a profile has no entities; kept by content it
        # would outlive the repair (a part file restored or rewritten leaves the
        # memories, hence the key, as they were). Kept with its snapshot only.
        if not key[2] or user_graph(snap, app, user) is not None:
            with _lock:
                _by_content[key] = found
                while len(_by_content) > KEEP_USERS:
                    _by_content.popitem(last=False)
    profile, topics, until = found
    if profile.store_version != snap.version:
        profile = replace(profile, store_version=snap.version)
    return profile, topics, until


def user_view(snap: StoreSnapshot, app: str, user: str) -> tuple[UserProfile, UserTopics]:
    """The profile of (app, user) in ``snap`` and what the user gives the domain index."""

    def build() -> tuple[tuple[UserProfile, UserTopics], float]:
        profile, topics, until = _computed(snap, app, user)
        return (profile, topics), until

    return _memo(snap, ("user", app, user), build)


def _users(snap: StoreSnapshot, app: str) -> tuple[dict[str, UserTopics], float]:
    """User -> topics of every user of ``app`` with live memories in ``snap``'s shards,
    and when the first of them stops holding."""
    out, until = {}, math.inf
    for owner, user in snap.tenants():
        if owner == app:
            _, topics, ends = _computed(snap, app, user)
            if topics.memories:
                out[user] = topics
                until = min(until, ends)
    return out, until


def users_of(snap: StoreSnapshot, app: str) -> dict[str, UserTopics]:
    """User -> topics of every user of ``app`` with live memories in ``snap``'s shards."""
    return _users(snap, app)[0]


def app_domain(snap: StoreSnapshot, app: str) -> DomainIndex:
    def build() -> tuple[DomainIndex, float]:
        users, until = _users(snap, app)
        return domain_index(app, snap.version, users), until

    return _memo(snap, ("domain", app), build)


def profile_over(memory_op: Callable[..., Any]) -> ProfileSource:
    """A ``Services(user_profile=...)`` hook over a server's memory operations
    (``memory_op(op, app_name, user_id)``: the replica holding the user's shard answers);
    None when the user has no memories yet."""

    def source(app_name: str, user_id: str) -> Mapping[str, Any] | None:
        try:
            return memory_op("profile", app_name, user_id)
        except NotFound:
            return None

    return source


class ProfileSnapshots(Protocol):
    """What the profile reads need of a memory service: its store and snapshots."""

    @property
    def store(self) -> object: ...

    def snapshot(self) -> StoreSnapshot: ...


class ProfileReads:
    """The profile and domain reads of one
    :class:`~mnemoray.memory.service.service.MemoryService` (``service.profiles``)."""

    def __init__(self, service: ProfileSnapshots) -> None:
        self.service = service

    def profile(self, app_name: str, user_id: str) -> UserProfile:
        """The user's profile at the current store version (NotFound: no memories)."""
        found = user_view(self.service.snapshot(), app_name, user_id)[0]
        if not found.memories:
            raise NotFound(
                f"{app_name}/{user_id} has no memories: nothing to profile", field="user_id"
            )
        return found

    def domain_part(self, app_name: str) -> DomainPart:
        """This replica's share of the app's domain index (every user in its shards)."""
        snap = self.service.snapshot()
        return DomainPart(snap.version, users_of(snap, app_name))

    def domain(self, app_name: str) -> DomainIndex:
        """The app's domain index at the current store version (NotFound: no memories).
        Reads across the app's users: the caller decides who may (an app-wide key)."""
        if getattr(self.service.store, "load_shards", None) is not None:
            # An Index replica holds some shards: ask each for its part and merge them.
            raise Unavailable(
                "the domain index needs every shard: ask each shard's "
                "replica for its domain_part and merge them"
            )
        return with_memories(app_domain(self.service.snapshot(), app_name))

    def profile_source(self) -> ProfileSource:
        """A ``Services(user_profile=...)`` hook: the profile as JSON, None when the
        user has no memories yet."""
        service = self.service

        def source(app_name: str, user_id: str) -> Mapping[str, Any] | None:
            found = user_view(service.snapshot(), app_name, user_id)[0]
            return found.to_dict() if found.memories else None

        return source


__all__ = [
    "ProfileReads",
    "ProfileSnapshots",
    "app_domain",
    "profile_over",
    "user_view",
    "users_of",
]
