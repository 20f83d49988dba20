"""The calls of liveness, recall and a user's memories (``mnemoray/http/routes/memories.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from mnemoray.client.call import Call, as_dict, by_status, drop_none, flag, model, seg
from mnemoray.schemas.graph import GraphResponse
from mnemoray.schemas.hygiene import (
    EditMemoryResponse,
    ForgetConfirmed,
    ForgetPreviewOut,
    ForgetRecord,
    ForgetRecords,
    MemoryVersions,
    UserErased,
)
from mnemoray.schemas.memories import (
    AddMemoriesResponse,
    AppRecallResponse,
    ForgetResponse,
    MemoryPage,
    RecallFiltersIn,
    RecallResponse,
)
from mnemoray.schemas.profiles import DomainResponse, ProfileResponse
from mnemoray.schemas.sessions import JobAccepted
from mnemoray.schemas.store import AppsResponse, StoreResponse

Filters = Mapping[str, Any] | RecallFiltersIn


def _forgotten_count(resp: httpx.Response) -> int:
    return ForgetResponse.model_validate_json(resp.content).forgotten


def healthz() -> Call[dict[str, str]]:
    return Call("GET", "/healthz", lambda r: r.json(), retry_safe=True)


def metrics() -> Call[str]:
    """Prometheus text of the app (under Serve: all ingress replicas added up)."""
    return Call("GET", "/metrics", lambda r: r.text, retry_safe=True)


def recall(
    app_name: str,
    user_id: str,
    query: str,
    top_k: int = 5,
    filters: Filters | None = None,
    mode: str | None = None,
    *,
    agent_name: str | None = None,
    explain: bool = False,
    budget_tokens: int | None = None,
) -> Call[RecallResponse]:
    """The best ``top_k`` memories for ``query``, best first (``.memories``, each naming
    its owner ``app_name``: another app may share the user's memories with this one).
    ``filters``: ``session_id``, ``after`` / ``before`` (epoch seconds or ISO-8601),
    ``kinds``; ``mode``: ``hybrid`` | ``dense`` | ``keyword`` (default: the server's);
    ``agent_name``: recall as this agent, which also sees its agent-only memories;
    ``explain``: each result with ``contributions`` (what each signal added to its
    score: ``score == 1 + sum``); ``budget_tokens``: the best that fit in that many
    tokens of text, none repeating another."""
    body = drop_none(
        app_name=app_name,
        user_id=user_id,
        query=query,
        top_k=top_k,
        filters=as_dict(filters) if filters else None,
        mode=mode,
        agent_name=agent_name,
        explain=explain or None,
        budget_tokens=budget_tokens,
    )
    return Call("POST", "/v1/recall", model(RecallResponse), json=body, retry_safe=True)


def recall_app(
    app_name: str,
    query: str,
    top_k: int = 5,
    filters: Filters | None = None,
    mode: str | None = None,
    *,
    agent_name: str | None = None,
) -> Call[AppRecallResponse]:
    """The best ``top_k`` memories for ``query`` across every user of ``app_name``, each
    with its ``user_id``. Needs an API key marked ``app_wide`` for the app (else 403).
    ``agent_name``: as in :func:`recall`."""
    body = drop_none(
        query=query,
        top_k=top_k,
        filters=as_dict(filters) if filters else None,
        mode=mode,
        agent_name=agent_name,
    )
    return Call(
        "POST",
        f"/v1/apps/{seg(app_name)}/recall",
        model(AppRecallResponse),
        json=body,
        retry_safe=True,
    )


def search(
    app_name: str,
    user_id: str,
    query: str,
    top_k: int = 5,
    *,
    mode: str | None = None,
    session_id: str | None = None,
    after: float | str | None = None,
    before: float | str | None = None,
    kinds: Sequence[str] | None = None,
    agent_name: str | None = None,
    explain: bool = False,
    budget_tokens: int | None = None,
) -> Call[RecallResponse]:
    """Recall as a GET with query parameters (cacheable, no request body); the same
    answer as :func:`recall`."""
    params = drop_none(
        app_name=app_name,
        user_id=user_id,
        query=query,
        top_k=top_k,
        mode=mode,
        session_id=session_id,
        after=after,
        before=before,
        kinds=list(kinds) if kinds else None,
        agent_name=agent_name,
        explain=flag(explain) if explain else None,
        budget_tokens=budget_tokens,
    )
    return Call("GET", "/v1/recall", model(RecallResponse), params=params, retry_safe=True)


def add_memories(
    app_name: str,
    user_id: str,
    memories: Sequence[str | Mapping[str, Any]],
    *,
    agent_name: str | None = None,
) -> Call[AddMemoriesResponse]:
    """Raw memories (a string is ``{"text": ...}``), committed before the answer.
    Safe to repeat: a memory's id is its content's hash, so a second copy is counted
    in ``duplicates`` and written nowhere. ``agent_name``: only that agent's recall sees
    the memories that name no agent of their own (default: every agent of the app)."""
    items = [{"text": m} if isinstance(m, str) else as_dict(m) for m in memories]
    return Call(
        "POST",
        "/v1/memories",
        model(AddMemoriesResponse),
        json=drop_none(app_name=app_name, user_id=user_id, memories=items, agent_name=agent_name),
        retry_safe=True,
    )


def add_session(
    session: Any,
    *,
    wait: bool = True,
    agent_name: str | None = None,
) -> Call[AddMemoriesResponse | JobAccepted]:
    """Distill a whole session (a ``Session`` or its dict) into memories; the same
    content again adds nothing (``status`` "unchanged"). ``wait=False``: queued on the
    server's disk, answered with a :class:`JobAccepted` (follow it with ``wait_for_job``).
    ``agent_name``: whose memories they are (default: as the app's ``scopes`` say)."""
    raw = as_dict(session)
    # Waited for, a repeat is answered "unchanged"; a queued repeat would be a second job.
    return Call(
        "POST",
        "/v1/memories",
        by_status({200: AddMemoriesResponse, 201: AddMemoriesResponse, 202: JobAccepted}),
        params={"wait": flag(wait)},
        json=drop_none(
            app_name=raw["app_name"], user_id=raw["user_id"], session=raw, agent_name=agent_name
        ),
        retry_safe=wait,
    )


def list_memories(
    app_name: str,
    user_id: str,
    cursor: str | None = None,
    limit: int = 50,
    *,
    kind: str | None = None,
    session_id: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Call[MemoryPage]:
    """One page, oldest first; pass ``.next_cursor`` back for the next (see
    ``iter_memories``). Filters: ``kind``, ``session_id``, ``since`` / ``until`` (epoch
    seconds: the remembered events' time overlaps them)."""
    params = drop_none(
        app_name=app_name,
        user_id=user_id,
        limit=limit,
        cursor=cursor or None,
        kind=kind,
        session_id=session_id,
        since=since,
        until=until,
    )
    return Call("GET", "/v1/memories", model(MemoryPage), params=params, retry_safe=True)


def forget_memory(app_name: str, user_id: str, memory_id: str, reason: str = "") -> Call[int]:
    """Forget one memory (``reason`` is kept on the forget record); how many rows went.
    A memory already forgotten (or another user's) is a NotFound."""
    params = {"app_name": app_name, "user_id": user_id, **({"reason": reason} if reason else {})}
    return Call(
        "DELETE", f"/v1/memories/{seg(memory_id)}", _forgotten_count, params=params, retry_safe=True
    )


def forget_user(app_name: str, user_id: str, reason: str = "") -> Call[int]:
    """Forget every memory of the user; how many rows went."""
    return Call(
        "DELETE",
        f"/v1/users/{seg(app_name)}/{seg(user_id)}/memories",
        _forgotten_count,
        params={"reason": reason} if reason else None,
        retry_safe=True,
    )


def forget_everything(app_name: str, user_id: str, reason: str = "") -> Call[UserErased]:
    """Forget everything about the user: queued jobs, sessions, artifacts and memories
    (``forget_user`` forgets the memories only); what went, per kind. Safe to repeat:
    a second call finishes an interrupted one and answers zeros for what is gone."""
    return Call(
        "DELETE",
        f"/v1/users/{seg(app_name)}/{seg(user_id)}",
        model(UserErased),
        params={"reason": reason} if reason else None,
        retry_safe=True,
    )


def forgotten(app_name: str, user_id: str) -> Call[list[ForgetRecord]]:
    """The user's forget records (what, why, by whom), oldest first."""
    return Call(
        "GET",
        "/v1/memories/forgotten",
        lambda r: ForgetRecords.model_validate_json(r.content).records,
        params={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


def graph(
    app_name: str,
    user_id: str,
    entity: str,
    depth: int = 2,
    types: Sequence[str] | None = None,
    at: float | str | None = None,
    limit: int = 50,
) -> Call[GraphResponse]:
    """The user's entity graph around ``entity`` (a name, an alias or an ``ent-`` id):
    the entity, its facts (holding now, or at world time ``at``: epoch seconds or
    ISO-8601) and what is within ``depth`` hops, nearest first (relations of ``types``)."""
    params: dict[str, Any] = drop_none(entity=entity, depth=depth, at=at, limit=limit)
    if types:
        params["type"] = list(types)
    return Call(
        "GET",
        f"/v1/graph/{seg(app_name)}/{seg(user_id)}",
        model(GraphResponse),
        params=params,
        retry_safe=True,
    )


def profile(app_name: str, user_id: str) -> Call[ProfileResponse]:
    """The user's profile: expertise areas (with evidence), communication style, topics
    declined, memories and sessions counted, last active (docs/profiles.md)."""
    return Call(
        "GET",
        f"/v1/profiles/{seg(app_name)}/{seg(user_id)}",
        model(ProfileResponse),
        retry_safe=True,
    )


def domain(app_name: str) -> Call[DomainResponse]:
    """The app's domain index: coverage per topic and month, well and weakly covered
    topics, themes across users. Needs a key marked ``app_wide`` (else 403)."""
    return Call("GET", f"/v1/domains/{seg(app_name)}", model(DomainResponse), retry_safe=True)


def list_apps() -> Call[AppsResponse]:
    """The apps the key may use that have memories or sessions; each app's users (with
    their memory counts) only for an open server or a key marked ``app_wide``."""
    return Call("GET", "/v1/apps", model(AppsResponse), retry_safe=True)


def store_report() -> Call[StoreResponse]:
    """The store's figures (``mnemoray stats``), what ``mnemoray doctor`` finds and the
    last batch runs. Needs an open server or a key marked ``app_wide`` (else 403)."""
    return Call("GET", "/v1/store", model(StoreResponse), retry_safe=True)


def edit_memory(
    app_name: str, user_id: str, memory_id: str, text: str, actor: str | None = None
) -> Call[EditMemoryResponse]:
    """Correct a memory's text: a new ``memory_id``, the old text kept as a version.
    Never repeated by the client: a second copy would write a second version."""
    return Call(
        "PATCH",
        f"/v1/memories/{seg(memory_id)}",
        model(EditMemoryResponse),
        json=drop_none(app_name=app_name, user_id=user_id, text=text, actor=actor),
    )


def memory_versions(app_name: str, user_id: str, memory_id: str) -> Call[MemoryVersions]:
    """Every text of a memory, oldest first (by its current or an earlier id)."""
    return Call(
        "GET",
        f"/v1/memories/{seg(memory_id)}/versions",
        model(MemoryVersions),
        params={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


def preview_forget(
    app_name: str,
    user_id: str,
    query: str,
    top_k: int = 10,
    *,
    mode: str | None = None,
    filters: Filters | None = None,
) -> Call[ForgetPreviewOut]:
    """What forgetting by ``query`` would take (nothing is forgotten), with the
    ``confirm_token`` that :func:`confirm_forget` takes."""
    body = drop_none(
        app_name=app_name,
        user_id=user_id,
        query=query,
        top_k=top_k,
        mode=mode,
        filters=as_dict(filters) if filters else None,
        dry_run=True,
    )
    return Call("POST", "/v1/memories:forget", model(ForgetPreviewOut), json=body, retry_safe=True)


def confirm_forget(
    app_name: str,
    user_id: str,
    confirm_token: str,
    memory_ids: Sequence[str] | None = None,
    *,
    reason: str = "",
    actor: str | None = None,
) -> Call[ForgetConfirmed]:
    """Forget exactly what the preview listed (or the subset ``memory_ids``). Safe to
    repeat: the token names those memories, a second copy finds nothing more."""
    body = drop_none(
        app_name=app_name,
        user_id=user_id,
        confirm=confirm_token,
        memory_ids=list(memory_ids) if memory_ids is not None else None,
        reason=reason or None,
        actor=actor,
    )
    return Call("POST", "/v1/memories:forget", model(ForgetConfirmed), json=body, retry_safe=True)
