"""Recall, add, list, correct and forget a user's memories.

Every change is recorded as made by the caller's API key (``key:<id>``, or
``local`` on a server without keys), followed by the request's ``actor`` if given.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import JSONResponse

from mnemoray import limits
from mnemoray.errors import InvalidInput, NotFound
from mnemoray.http.auth import Principal
from mnemoray.http.routes.deps import Backend, Caller, Http, IdQuery, elapsed_ms
from mnemoray.schemas.common import (
    MAX_BUDGET_TOKENS,
    MAX_ID_CHARS,
    MAX_PAGE,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    Kind,
    Mode,
)
from mnemoray.schemas.hygiene import (
    MAX_REASON_CHARS,
    EditMemoryRequest,
    EditMemoryResponse,
    ForgetByQueryRequest,
    ForgetConfirmed,
    ForgetPreviewOut,
    ForgetRecords,
    MemoryVersions,
    UserErased,
)
from mnemoray.schemas.memories import (
    AGENT_NAME_DOC,
    BUDGET_DOC,
    EXPLAIN_DOC,
    AddMemoriesRequest,
    AddMemoriesResponse,
    AgentName,
    AppRecallRequest,
    AppRecallResponse,
    ForgetResponse,
    MemoryPage,
    RecallRequest,
    RecallResponse,
)
from mnemoray.schemas.sessions import JobAccepted

router = APIRouter(tags=["memory"])
# A query-string time as a number in the range every store can hold (mnemoray.limits).
TIME_BOUNDS: dict[str, Any] = {"ge": limits.TIME_MIN, "lt": limits.TIME_MAX, "allow_inf_nan": False}
ReasonQuery = Annotated[
    str, Query(max_length=MAX_REASON_CHARS, description="why: kept on the forget record")
]


def actor_of(caller: Principal, actor: str | None = None) -> str:
    return f"{caller.actor} ({actor})" if actor else caller.actor


def explained(explain: bool, budget_tokens: int | None = None) -> dict[str, Any]:
    """``explain`` and ``budget_tokens`` for the backend, passed only when asked: backends
    that predate them still answer the rest."""
    out: dict[str, Any] = {"explain": True} if explain else {}
    if budget_tokens is not None:
        out["budget_tokens"] = budget_tokens
    return out


def _num(value: str | None) -> float | str | None:
    """A query-string time: epoch seconds as a number, else the ISO-8601 text."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


@router.post(
    "/v1/recall",
    operation_id="recall",
    response_model=RecallResponse,
    summary="Best memories of one user for a query",
)
async def recall(body: RecallRequest, caller: Caller, backend: Backend) -> JSONResponse:
    start = time.perf_counter()
    caller.check(body.app_name)
    out = await backend.recall(
        body.app_name,
        body.user_id,
        body.query,
        body.top_k,
        body.filter_dict(),
        body.mode,
        **explained(body.explain, body.budget_tokens),
    )
    out["took_ms"] = elapsed_ms(start)
    # Built by the server itself: skip re-validating it against the response model.
    return JSONResponse(out)


@router.get(
    "/v1/recall",
    operation_id="search",
    response_model=RecallResponse,
    summary="Recall with query parameters (no request body: behind Serve's proxy "
    "it saves the replica's round trip to fetch the body)",
)
async def recall_get(
    caller: Caller,
    backend: Backend,
    app_name: IdQuery,
    user_id: IdQuery,
    query: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
    top_k: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 5,
    mode: Mode | None = None,
    session_id: Annotated[str | None, Query(min_length=1, max_length=MAX_ID_CHARS)] = None,
    after: Annotated[str | None, Query(max_length=64)] = None,
    before: Annotated[str | None, Query(max_length=64)] = None,
    kinds: Annotated[list[Kind] | None, Query()] = None,
    agent_name: Annotated[AgentName | None, Query(description=AGENT_NAME_DOC)] = None,
    explain: Annotated[bool, Query(description=EXPLAIN_DOC)] = False,
    budget_tokens: Annotated[
        int | None, Query(ge=1, le=MAX_BUDGET_TOKENS, description=BUDGET_DOC)
    ] = None,
) -> JSONResponse:
    start = time.perf_counter()
    caller.check(app_name)
    filters = {
        k: v
        for k, v in (
            ("session_id", session_id),
            ("after", _num(after)),
            ("before", _num(before)),
            ("kinds", kinds),
            ("agent_name", agent_name),
        )
        if v is not None
    }
    out = await backend.recall(
        app_name, user_id, query, top_k, filters or None, mode, **explained(explain, budget_tokens)
    )
    out["took_ms"] = elapsed_ms(start)
    return JSONResponse(out)


@router.post(
    "/v1/apps/{app_name}/recall",
    operation_id="recall_app",
    response_model=AppRecallResponse,
    summary="Best memories across every user of an app (app-wide keys only)",
)
async def recall_app(
    app_name: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)],
    body: AppRecallRequest,
    caller: Caller,
    backend: Backend,
) -> dict[str, Any]:
    start = time.perf_counter()
    # Tenant isolation: a user-facing key (not marked app_wide) is refused with 403.
    caller.check_app_wide(app_name)
    out = await backend.recall_app(app_name, body.query, body.top_k, body.filter_dict(), body.mode)
    out["took_ms"] = elapsed_ms(start)
    return out


@router.post(
    "/v1/memories",
    operation_id="add_memories",
    response_model=AddMemoriesResponse | JobAccepted,
    status_code=201,
    summary="Add a session (distilled) or raw memories; "
    "?wait=false queues a session's ingestion on disk instead (202 with a job id)",
)
async def add_memories(
    body: AddMemoriesRequest,
    caller: Caller,
    backend: Backend,
    http: Http,
    response: Response,
    wait: bool = True,
) -> dict[str, Any]:
    start = time.perf_counter()
    caller.check(body.app_name)
    body.check_session()  # before a job is queued: wait=false answers as wait=true would
    check_embed_work(body, wait, http.max_sync_embed_chars)
    if body.session is not None and not wait:
        if body.agent_name is not None:  # a queued job distills as the app's scopes say
            raise InvalidInput(
                "not with wait=false: a queued session's memories belong "
                "to its agent as the app's scopes.memory_scope says",
                field="agent_name",
            )
        response.status_code = 202
        return await backend.run_io(
            backend.enqueue_session,
            body.app_name,
            body.user_id,
            body.session,
            submitter=caller.actor,
        )
    if body.session is not None:
        out = await backend.memory_op(
            "add_session",
            body.app_name,
            body.user_id,
            session=body.session,
            agent_name=body.agent_name,
        )
    else:
        out = await backend.memory_op(
            "add_memories",
            body.app_name,
            body.user_id,
            memories=[m.model_dump() for m in body.memories or ()],
            actor=actor_of(caller),
            agent_name=body.agent_name,
        )
    out["took_ms"] = elapsed_ms(start)
    return out


def check_embed_work(body: AddMemoriesRequest, wait: bool, limit: int) -> None:
    """A synchronous add embeds before it answers: past ``limit`` characters it is
    refused (413) before any work, naming the way around it. A queued session is not
    the request's to wait for, so it is not counted."""
    if body.session is not None:
        if wait:
            chars = limits.event_text_chars(body.session.get("events"))
            instead = "post it with ?wait=false to queue its ingestion"
            limits.check_sync_embed(chars, limit, "session", instead)
    elif body.memories:
        chars = sum(len(m.key_text or m.text) for m in body.memories)
        limits.check_sync_embed(chars, limit, "memories", "send them in smaller requests")


@router.get(
    "/v1/memories",
    operation_id="list_memories",
    response_model=MemoryPage,
    summary="A user's memories, oldest first, paged",
)
async def list_memories(
    caller: Caller,
    backend: Backend,
    app_name: IdQuery,
    user_id: IdQuery,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    kind: Kind | None = None,
    session_id: Annotated[str | None, Query(min_length=1, max_length=MAX_ID_CHARS)] = None,
    since: Annotated[
        float | None,
        Query(**TIME_BOUNDS, description="epoch seconds: memories of events at or after it"),
    ] = None,
    until: Annotated[
        float | None,
        Query(**TIME_BOUNDS, description="epoch seconds: memories of events at or before it"),
    ] = None,
) -> dict[str, Any]:
    caller.check(app_name)
    filters = {
        k: v
        for k, v in (("kind", kind), ("session_id", session_id), ("since", since), ("until", until))
        if v is not None
    }
    return await backend.memory_op(
        "list_memories", app_name, user_id, cursor=cursor, limit=limit, **filters
    )


@router.delete(
    "/v1/memories/{memory_id}",
    operation_id="forget_memory",
    response_model=ForgetResponse,
    summary="Forget one memory of a user",
)
async def forget_memory(
    memory_id: str,
    caller: Caller,
    backend: Backend,
    app_name: IdQuery,
    user_id: IdQuery,
    reason: ReasonQuery = "",
) -> dict[str, Any]:
    caller.check(app_name)
    n = await backend.memory_op(
        "forget_memory",
        app_name,
        user_id,
        memory_id=memory_id,
        reason=reason,
        actor=actor_of(caller),
    )
    if not n:  # also when it is another user's: nothing leaks about other tenants
        raise NotFound(f"no memory {memory_id!r} for this user", field="memory_id")
    return {"forgotten": n}


@router.delete(
    "/v1/users/{app_name}/{user_id}/memories",
    operation_id="forget_user",
    response_model=ForgetResponse,
    summary="Forget every memory of a user",
)
async def forget_user(
    app_name: str, user_id: str, caller: Caller, backend: Backend, reason: ReasonQuery = ""
) -> dict[str, Any]:
    caller.check(app_name)
    return {
        "forgotten": await backend.memory_op(
            "forget_user", app_name, user_id, reason=reason, actor=actor_of(caller)
        )
    }


@router.delete(
    "/v1/users/{app_name}/{user_id}",
    operation_id="forget_everything",
    response_model=UserErased,
    summary="Forget everything about a user: queued jobs, sessions, artifacts, then "
    "memories (a rerun finishes an interrupted one and answers zeros for what is gone)",
)
async def forget_everything(
    app_name: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)],
    user_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)],
    caller: Caller,
    backend: Backend,
    reason: ReasonQuery = "",
) -> dict[str, Any]:
    caller.check(app_name)
    return await backend.run_io(
        backend.forget_everything, app_name, user_id, reason=reason, actor=actor_of(caller)
    )


@router.get(
    "/v1/memories/forgotten",
    operation_id="forgotten",
    response_model=ForgetRecords,
    summary="A user's forget records: what was forgotten, why and by whom",
)
async def forgotten(
    caller: Caller, backend: Backend, app_name: IdQuery, user_id: IdQuery
) -> dict[str, Any]:
    caller.check(app_name)
    return await backend.memory_op("forgotten", app_name, user_id)


@router.patch(
    "/v1/memories/{memory_id}",
    operation_id="edit_memory",
    response_model=EditMemoryResponse,
    summary="Correct a memory: replace its text (re-embedded); the old text is "
    "kept as a version and who changed it is recorded",
)
async def edit_memory(
    memory_id: str, body: EditMemoryRequest, caller: Caller, backend: Backend
) -> dict[str, Any]:
    caller.check(body.app_name)
    return await backend.memory_op(
        "edit_memory",
        body.app_name,
        body.user_id,
        memory_id=memory_id,
        text=body.text,
        actor=actor_of(caller, body.actor),
    )


@router.get(
    "/v1/memories/{memory_id}/versions",
    operation_id="memory_versions",
    response_model=MemoryVersions,
    summary="Every text of a memory, oldest first (its current or an earlier id)",
)
async def memory_versions(
    memory_id: str, caller: Caller, backend: Backend, app_name: IdQuery, user_id: IdQuery
) -> dict[str, Any]:
    caller.check(app_name)
    return await backend.memory_op("memory_versions", app_name, user_id, memory_id=memory_id)


@router.post(
    "/v1/memories:forget",
    operation_id="forget_by_query",
    response_model=ForgetPreviewOut | ForgetConfirmed,
    summary="Forget by query: `dry_run: true` previews and returns a confirm token; "
    "`confirm: <token>` forgets exactly what was previewed",
)
async def forget_by_query(
    body: ForgetByQueryRequest, caller: Caller, backend: Backend
) -> dict[str, Any]:
    caller.check(body.app_name)
    return await backend.memory_op(
        "forget_by_query",
        body.app_name,
        body.user_id,
        dry_run=body.dry_run,
        query=body.query,
        top_k=body.top_k,
        mode=body.mode,
        filters=body.filters.model_dump(exclude_none=True) if body.filters else None,
        confirm=body.confirm,
        memory_ids=body.memory_ids,
        reason=body.reason,
        actor=actor_of(caller, body.actor),
    )
