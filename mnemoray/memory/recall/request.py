"""One recall, resolved once at the edge: :class:`RecallRequest` holds everything a recall
needs (scope, query, top_k, the checked mode, the parsed filters, the per-recall options),
built by :func:`resolve_recall`, the one place a recall's arguments are checked and its
mode defaulted. Every layer below takes the request whole.

Whether a recall needs its query embedded is one rule, :meth:`RecallRequest.needs_vector`:
the mode uses the dense signal, the store embeds vectors, and the scope has memories
(asked last, and only when the rest hold: a keyword recall reads nothing for it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemoray.memory.recall.config import (
    MODE_SIGNALS,
    RetrievalConfig,
    check_ids,
    check_mode,
    check_query,
)
from mnemoray.memory.recall.modes import Mode
from mnemoray.memory.records.filters import RecallFilters, RetrievalError


@dataclass(frozen=True)
class RecallRequest:
    """One checked recall. ``user_id`` None: app-wide (every user of ``app_name``).

    ``mode``: checked, the app's ``RetrievalConfig.mode`` when the caller gave none.
    ``filters``: parsed (the agent whose view it is: ``filters.agent_name``).
    ``explain``: answers carry each signal's contribution. ``now``: the time the recall
    is read at (None: the clock; relative times in the query use
    ``filters.reference_time`` first). ``shared``: include the same user's memories of
    the apps that share with this one. ``recalled``: tell ``on_memory_recalled`` hooks
    (False for a look that is no recall, e.g. a forget-by-query preview).
    ``budget_tokens``: the results' text fits in that many tokens, the best that fit
    (:mod:`mnemoray.memory.recall.picking`); None: ``top_k`` alone bounds them.
    """

    app_name: str
    user_id: str | None
    query: str
    top_k: int
    mode: Mode
    filters: RecallFilters = field(default_factory=RecallFilters)
    explain: bool = False
    now: float | None = None
    shared: bool = True
    recalled: bool = True
    budget_tokens: int | None = None

    @property
    def app_wide(self) -> bool:
        return self.user_id is None

    @property
    def agent_name(self) -> str | None:
        """The agent whose view this is (its own agent-only memories join the shared)."""
        return self.filters.agent_name

    @property
    def uses_dense(self) -> bool:
        """Whether the mode ranks by the dense signal at all."""
        return "dense" in MODE_SIGNALS[self.mode]

    def needs_vector(self, *, embeds: bool, has_memories: Callable[[], bool] | bool) -> bool:
        """The one rule for embedding the query: the mode uses the dense signal, the
        store embeds vectors (``embeds``: a query model that matches the store), and the
        scope has memories (``has_memories``, called last: a new user costs no model
        call, a keyword recall no store read). The query is non-blank by construction."""
        if not (self.uses_dense and embeds):
            return False
        return bool(has_memories() if callable(has_memories) else has_memories)


def check_top_k(top_k: Any) -> int:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise RetrievalError(f"must be a positive integer, got {top_k!r}", field="top_k")
    return top_k


def check_budget(budget_tokens: Any) -> int | None:
    if budget_tokens is None:
        return None
    if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 1:
        raise RetrievalError(
            f"must be a positive integer or null, got {budget_tokens!r}", field="budget_tokens"
        )
    return budget_tokens


def resolve_recall(
    config: RetrievalConfig,
    app_name: str,
    user_id: str | None,
    query: str,
    top_k: int = 5,
    mode: str | None = None,
    filters: RecallFilters | Mapping[str, Any] | None = None,
    *,
    explain: bool = False,
    now: float | None = None,
    shared: bool = True,
    recalled: bool = True,
    budget_tokens: int | None = None,
) -> RecallRequest:
    """The checked request of one recall over an app whose ranking is ``config``;
    :class:`~mnemoray.memory.records.filters.RetrievalError` (an ``InvalidInput``) naming
    the ``field`` otherwise. Checked in the order the service always answered them:
    mode, filters, query, ids, top_k, budget_tokens."""
    checked = check_mode(mode or config.mode)
    flt = RecallFilters.of(filters)
    check_query(query)
    check_ids(app_name, "-" if user_id is None else user_id)
    return RecallRequest(
        app_name,
        user_id,
        query,
        check_top_k(top_k),
        checked,
        flt,
        bool(explain),
        now,
        shared,
        recalled,
        check_budget(budget_tokens),
    )


def same_scope(request: RecallRequest, app_name: str, user_id: str | None) -> None:
    """A resolved request handed to an operation of (app, user) must be of that scope:
    the operation was routed (its shard picked, its key checked) by those ids."""
    if (request.app_name, request.user_id) != (app_name, user_id):
        raise ValueError(
            f"a recall of {request.app_name!r}/{request.user_id!r} "
            f"sent as one of {app_name!r}/{user_id!r}"
        )


__all__ = ["RecallRequest", "check_budget", "check_top_k", "resolve_recall", "same_scope"]
