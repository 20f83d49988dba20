"""Memory scopes beyond (app, user): agent-only memories, and a user's memories shared
across apps when both apps' configuration consents.

Agent scope. A memory carries ``agent_name``: "" (shared: every agent of the app sees it
in that user's recall) or the one agent whose recall sees it. A recall made for agent X
(``RecallFilters.agent_name``) sees the shared memories plus X's own; a recall without an
agent sees only the shared ones. Memories distilled from a session are stamped with its
agent when the app's ``memory_scope`` is ``agent`` (:func:`session_agent`); ``add_memories``
stamps whatever agent each memory names.

Cross-app sharing. App A reads user U's memories of app B only when A lists B in
``read_from`` and B lists A in ``share_with``: a one-sided list shares nothing. Such a
recall ranks A's and B's candidates of U together (one candidate set, one fused ranking);
each result names its owner app. Agent-only memories never cross apps. Sharing never
crosses users: the same ``user_id`` is the only key read. A shared memory stays its owner's:
forget and edit from A are refused with :class:`NotOwner` (403) naming B.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mnemoray.errors import Forbidden, InvalidInput, Unavailable
from mnemoray.memory.records.agent_names import check_agent_name
from mnemoray.memory.records.record import Memory
from mnemoray.memory.store.layout import shard_of

if TYPE_CHECKING:
    from mnemoray.sessions.session import Session

MemoryScope = Literal["user", "agent"]
MEMORY_SCOPES: tuple[str, ...] = ("user", "agent")


class Snapshot(Protocol):
    """What these checks read of a ``StoreSnapshot`` (not imported: retrieval imports
    this module, and the snapshot imports retrieval)."""

    @property
    def shards(self) -> int: ...

    def get(self, memory_id: str, owner: tuple[str, str] | None = None) -> Memory | None: ...


class ScopeError(InvalidInput):
    """A scope setting or an agent name is wrong; ``field`` names it (HTTP 422)."""


class NotOwner(Forbidden):
    """A change (forget, edit) asked of an app that only reads the memory: the app that
    shares it owns it (HTTP 403)."""


@dataclass(frozen=True)
class AppScope:
    """One app's scope settings: how its memories are stamped, whom it reads from and
    whom it shares with."""

    memory_scope: MemoryScope = "user"
    read_from: tuple[str, ...] = ()
    share_with: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.memory_scope not in MEMORY_SCOPES:
            raise ScopeError(
                f"{self.memory_scope!r} is not one of {', '.join(MEMORY_SCOPES)}",
                field="memory_scope",
            )
        for name in ("read_from", "share_with"):
            apps = getattr(self, name)
            if isinstance(apps, str) or not isinstance(apps, Iterable):
                raise ScopeError("expected a list of app names", field=name)
            apps = tuple(apps)
            for i, app in enumerate(apps):
                if not isinstance(app, str) or not app:
                    raise ScopeError("must be a non-empty string", field=f"{name}[{i}]")
            object.__setattr__(self, name, tuple(dict.fromkeys(apps)))


@dataclass(frozen=True)
class ScopePolicy:
    """Every app's :class:`AppScope` (``default`` for the apps not listed)."""

    default: AppScope = field(default_factory=AppScope)
    apps: Mapping[str, AppScope] = field(default_factory=dict)

    def for_app(self, app_name: str) -> AppScope:
        return self.apps.get(app_name, self.default)

    def memory_scope(self, app_name: str) -> MemoryScope:
        return self.for_app(app_name).memory_scope

    def readable_apps(self, app_name: str) -> tuple[str, ...]:
        """The other apps whose (same user's) shared memories ``app_name`` recalls: those
        it reads from that also share with it. Both sides consent or nothing is read."""
        return tuple(
            b
            for b in self.for_app(app_name).read_from
            if b != app_name and app_name in self.for_app(b).share_with
        )

    @classmethod
    def of(cls, value: ScopePolicy | Mapping[str, Mapping[str, object]] | None) -> ScopePolicy:
        """A policy, or ``{app: {memory_scope, read_from, share_with}}``."""
        if value is None:
            return cls()
        if isinstance(value, ScopePolicy):
            return value
        apps = {}
        for app, raw in dict(value).items():
            try:
                apps[app] = AppScope(**dict(raw))  # type: ignore[arg-type]
            except ScopeError as exc:
                raise exc.within(f"scopes.apps.{app}") from exc
            except TypeError as exc:
                raise ScopeError(str(exc), field=f"scopes.apps.{app}") from exc
        return cls(apps=apps)


NO_SHARING = ScopePolicy()


# -- stamping ---------------------------------------------------------------------------
def session_agent(session: Session, scope: MemoryScope, agent_name: str | None = None) -> str:
    """The agent a session's distilled memories belong to ("": shared).

    ``agent_name`` given: that one (checked). Else under ``memory_scope: agent`` the one
    agent that authored the session's model events; a session of several agents (or none)
    is refused, since stamping it with any one of them would hide it from the others or
    show one agent's memories to another."""
    if agent_name is not None:
        return check_agent_name(agent_name, ScopeError)
    if scope != "agent":
        return ""
    authors = sorted({e.author for e in session.events if e.role != "user"})
    if len(authors) != 1:
        which = ", ".join(repr(a) for a in authors[:5]) if authors else "no agent"
        raise ScopeError(
            f"the app's memory_scope is 'agent' and this session has events of "
            f"{which}; pass agent_name to say whose memories they are",
            field="agent_name",
        )
    return check_agent_name(authors[0], ScopeError)


def stamp_agent(memories: Sequence[Memory], agent_name: str) -> list[Memory]:
    """``memories`` owned by ``agent_name``; content hash and derived ids follow the new
    scope (an explicitly chosen ``memory_id`` is kept)."""
    if not agent_name:
        return list(memories)
    out = []
    for m in memories:
        if m.agent_name == agent_name:
            out.append(m)
            continue
        derived = m.memory_id == m.content_hash[:24]
        out.append(
            replace(
                m, agent_name=agent_name, content_hash="", memory_id="" if derived else m.memory_id
            )
        )
    return out


# -- recall -----------------------------------------------------------------------------
def agent_rows(table: pa.Table, agent_name: str | None) -> np.ndarray | None:
    """Keep-mask of one app's rows an app-wide search for ``agent_name`` may see: shared
    rows (null: written before scopes) and the agent's own; None when every row is shared
    (the common case: the search then stays unmasked). Applied inside the search, before
    its top-k, so hidden rows never take the places of visible ones."""
    if "agent_name" not in table.column_names:
        return None
    names = table["agent_name"]
    scoped = pc.fill_null(pc.not_equal(names, ""), False)
    if not pc.any(scoped).as_py():
        return None
    keep = pc.invert(scoped)
    if agent_name:
        keep = pc.or_(keep, pc.fill_null(pc.equal(names, agent_name), False))
    return keep.to_numpy(zero_copy_only=False)


def visible(
    app_names: np.ndarray, agent_names: np.ndarray, app_name: str, agent_name: str | None
) -> np.ndarray | None:
    """Keep-mask of the candidates a recall of ``app_name`` for ``agent_name`` may see:
    shared rows, plus the agent's own rows of ``app_name`` (None: every row is visible)."""
    scoped = agent_names != ""
    if not scoped.any():
        return None
    if not agent_name:
        return ~scoped
    return ~scoped | ((agent_names == agent_name) & (app_names == app_name))


def check_readable(
    snap: Snapshot, loaded: Iterable[int] | None, apps: Sequence[str], user_id: str
) -> None:
    """A replica that holds only some shards (``index_mode: deployment``) must hold every
    shared app's shard of the user, or its answer would silently miss memories."""
    if loaded is None:
        return
    have = set(loaded)
    for app in apps:
        if shard_of(app, user_id, snap.shards) not in have:
            raise Unavailable(
                f"recall shares app {app!r}, whose memories of this user are on "
                f"another shard; cross-app recall needs the whole store in "
                f"one replica (server.index_mode: ingress)"
            )


def refuse_foreign(
    snap: Snapshot, policy: ScopePolicy, app_name: str, user_id: str, memory_id: str, action: str
) -> None:
    """Raise :class:`NotOwner` when ``memory_id`` is not ``app_name``'s but a memory of the
    same user that a consenting app shares with it (so the caller could see it in recall);
    any other id stays a plain "not found" that says nothing about other apps."""
    for owner in policy.readable_apps(app_name):
        m = snap.get(memory_id, (owner, user_id))
        if m is not None and not m.agent_name:
            raise NotOwner(
                f"{memory_id!r} belongs to app {owner!r}, which shares it with "
                f"{app_name!r} to read only; {action} it through app {owner!r}",
                field="memory_id",
            )


__all__ = [
    "MEMORY_SCOPES",
    "NO_SHARING",
    "AppScope",
    "MemoryScope",
    "NotOwner",
    "ScopeError",
    "ScopePolicy",
    "check_readable",
    "refuse_foreign",
    "session_agent",
    "stamp_agent",
    "visible",
]
