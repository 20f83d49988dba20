"""The HTTP routes (FastAPI; OpenAPI at /docs), built per ingress replica.

Status codes: bad input is 400 (malformed JSON) or 422 (a field is invalid; the
message names it), 401/403 for keys, 404 for unknown sessions / memories /
artifacts, 409 for conflicts (session exists, stale ``expected_version``,
duplicate event id, session already ended), 413 for an oversize body. A 500 is
a bug: it is logged with its traceback and answered without internals.

Tenant fields: POST/PUT bodies carry ``app_name`` and ``user_id``; GET/DELETE
take them from the path or the query string (see ``serve.schemas``).
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from mnemoray.artifacts import DEFAULT_MIME, ArtifactNotFoundError
from mnemoray.compiler.template import TemplateError
from mnemoray.events import Event, EventError
from mnemoray.session import Session
from mnemoray.session_store import (
    DuplicateEventError,
    SessionEndedError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
)
from serve.auth import AuthError, Principal, authenticate
from serve.metrics import CONTENT_TYPE, ServeMiddleware
from serve.schemas import (
    MAX_ID_CHARS,
    MAX_PAGE,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    AddMemoriesRequest,
    AddMemoriesResponse,
    AppendEventsRequest,
    AppendEventsResponse,
    ArtifactNames,
    ArtifactSaved,
    ArtifactVersions,
    CompileRequest,
    CreateSessionRequest,
    EndSessionRequest,
    EndSessionResponse,
    ErrorResponse,
    ForgetResponse,
    Kind,
    MemoryPage,
    Mode,
    RecallRequest,
    RecallResponse,
    SessionList,
    SessionOut,
)

if TYPE_CHECKING:
    from serve.ingress import MemoryIngress

log = logging.getLogger("ray.serve")

_FIELD = re.compile(r"^[A-Za-z_][\w.\[\]]*$")
IdQuery = Annotated[str, Query(min_length=1, max_length=MAX_ID_CHARS)]
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 409, 413, 422)}


def error(status: int, message: str, field: str | None = None,
          extra: dict[str, Any] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": {"status": status, "message": message, "field": field}}
    if extra:
        body["error"].update(extra)
    return JSONResponse(body, status_code=status)


def _field_of(message: str) -> str | None:
    head, sep, _ = message.partition(": ")
    return head if sep and _FIELD.match(head) else None


def _num(value: str | None) -> float | str | None:
    """A query-string time: epoch seconds as a number, else the ISO-8601 text."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _validation_message(err: dict[str, Any]) -> tuple[str, str]:
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "header"):
        loc = loc[1:] or loc[:1]
    field = ".".join(loc) or "body"
    msg = err.get("msg", "invalid")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return field, f"{field}: {msg}"


async def principal(request: Request) -> Principal:
    """The caller (a dependency of every route but /healthz)."""
    ing = request.app.state.ingress
    client = request.client.host if request.client else None
    return authenticate(ing.keys, request.headers.get("authorization"), client,
                        allow_remote_without_keys=ing.settings.allow_remote_without_keys)


# Module level: FastAPI resolves (string) annotations in the module's namespace.
Caller = Annotated[Principal, Depends(principal)]


def build_api(ing: MemoryIngress) -> FastAPI:
    s = ing.settings
    api = FastAPI(
        title="mnemoray", version="0.1.0",
        description="Long-term memory and compiled context for LLM agents. Authenticate "
                    "with `Authorization: Bearer <api key>` when the server has keys.",
        responses=ERRORS)
    api.state.ingress = ing
    api.add_middleware(ServeMiddleware, metrics=ing.metrics, max_body_bytes=s.max_body_bytes)

    # -- errors --------------------------------------------------------------------------
    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = list(exc.errors())
        if not errs:
            return error(422, "body: invalid request")
        if errs[0].get("type") == "json_invalid":
            return error(400, f"body: invalid JSON ({errs[0].get('msg', '')})", "body")
        field, message = _validation_message(errs[0])
        return error(422, message, field, {"errors": [
            {"field": f, "message": m} for f, m in map(_validation_message, errs[:20])]})

    @api.exception_handler(AuthError)
    async def _auth(request: Request, exc: AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        resp = error(exc.status, exc.message, "authorization" if exc.status == 401
                     else "app_name")
        if headers:
            resp.headers.update(headers)
        return resp

    @api.exception_handler(SessionNotFoundError)
    @api.exception_handler(ArtifactNotFoundError)
    async def _not_found(request: Request, exc: Exception) -> JSONResponse:
        return error(404, exc.args[0] if exc.args else str(exc))

    @api.exception_handler(SessionExistsError)
    @api.exception_handler(StaleSessionError)
    @api.exception_handler(DuplicateEventError)
    @api.exception_handler(SessionEndedError)
    async def _conflict(request: Request, exc: Exception) -> JSONResponse:
        return error(409, str(exc))

    @api.exception_handler(TemplateError)
    async def _template(request: Request, exc: TemplateError) -> JSONResponse:
        return error(422, str(exc), f"agent.instruction.{exc.key}")

    @api.exception_handler(ValueError)  # every core input error: "field: reason"
    async def _bad_input(request: Request, exc: ValueError) -> JSONResponse:
        message = str(exc)
        return error(422, message, _field_of(message))

    @api.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @api.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error(500, "internal error (logged on the server)")

    # -- health & metrics ----------------------------------------------------------------
    @api.get("/healthz", tags=["ops"], summary="Liveness (no auth)")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/metrics", tags=["ops"], summary="Prometheus metrics of this replica",
             response_class=Response)
    async def metrics(caller: Caller) -> Response:
        return Response(ing.metrics.render(), media_type=CONTENT_TYPE)

    # -- recall --------------------------------------------------------------------------
    @api.post("/v1/recall", response_model=RecallResponse, tags=["memory"],
              summary="Best memories of one user for a query")
    async def recall(body: RecallRequest, caller: Caller) -> JSONResponse:
        start = time.perf_counter()
        caller.check(body.app_name)
        out = await ing.recall(body.app_name, body.user_id, body.query, body.top_k,
                               body.filters.model_dump(exclude_none=True)
                               if body.filters else None, body.mode)
        out["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
        # Built by the server itself: skip re-validating it against the response model.
        return JSONResponse(out)

    @api.get("/v1/recall", response_model=RecallResponse, tags=["memory"],
             summary="Recall with query parameters (no request body: saves Serve's body "
             "round trip to the proxy)")
    async def recall_get(caller: Caller, app_name: IdQuery, user_id: IdQuery,
                         query: Annotated[str, Query(min_length=1,
                                                     max_length=MAX_QUERY_CHARS)],
                         top_k: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 5,
                         mode: Mode | None = None,
                         session_id: Annotated[str | None, Query(
                             min_length=1, max_length=MAX_ID_CHARS)] = None,
                         after: Annotated[str | None, Query(max_length=64)] = None,
                         before: Annotated[str | None, Query(max_length=64)] = None,
                         kinds: Annotated[list[Kind] | None, Query()] = None,
                         ) -> JSONResponse:
        start = time.perf_counter()
        caller.check(app_name)
        filters = {k: v for k, v in (("session_id", session_id), ("after", _num(after)),
                                     ("before", _num(before)), ("kinds", kinds))
                   if v is not None}
        out = await ing.recall(app_name, user_id, query, top_k, filters or None, mode)
        out["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return JSONResponse(out)

    # -- memories ----------------------------------------------------------------------
    @api.post("/v1/memories", response_model=AddMemoriesResponse, status_code=201,
              tags=["memory"], summary="Add a session (distilled) or raw memories")
    async def add_memories(body: AddMemoriesRequest, caller: Caller) -> dict[str, Any]:
        start = time.perf_counter()
        caller.check(body.app_name)
        if body.session is not None:
            out = await ing.memory_op("add_session", body.app_name, body.user_id,
                                      session=body.session)
        else:
            out = await ing.memory_op("add_memories", body.app_name, body.user_id,
                                      memories=[m.model_dump() for m in body.memories or ()])
        out["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return out

    @api.get("/v1/memories", response_model=MemoryPage, tags=["memory"],
             summary="A user's memories, oldest first, paged")
    async def list_memories(caller: Caller, app_name: IdQuery, user_id: IdQuery,
                            cursor: Annotated[str | None, Query(max_length=1024)] = None,
                            limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
                            ) -> dict[str, Any]:
        caller.check(app_name)
        return await ing.memory_op("list_memories", app_name, user_id, cursor=cursor,
                                   limit=limit)

    @api.delete("/v1/memories/{memory_id}", response_model=ForgetResponse, tags=["memory"],
                summary="Forget one memory of a user")
    async def forget_memory(memory_id: str, caller: Caller, app_name: IdQuery,
                            user_id: IdQuery) -> dict[str, Any]:
        caller.check(app_name)
        n = await ing.memory_op("forget_memory", app_name, user_id, memory_id=memory_id)
        if not n:
            return error(404, f"memory_id: no memory {memory_id!r} for this user",
                         "memory_id")
        return {"forgotten": n}

    @api.delete("/v1/users/{app_name}/{user_id}/memories", response_model=ForgetResponse,
                tags=["memory"], summary="Forget every memory of a user")
    async def forget_user(app_name: str, user_id: str, caller: Caller) -> dict[str, Any]:
        caller.check(app_name)
        return {"forgotten": await ing.memory_op("forget_user", app_name, user_id)}

    # -- sessions ----------------------------------------------------------------------
    def session_out(session: Session) -> dict[str, Any]:
        return {**session.to_dict(), "version": session.version}

    @api.post("/v1/sessions", response_model=SessionOut, status_code=201, tags=["sessions"])
    async def create_session(body: CreateSessionRequest, caller: Caller) -> dict[str, Any]:
        caller.check(body.app_name)
        session = await ing.run_io(ing.sessions.create_session, body.app_name, body.user_id,
                                   body.session_id, body.state)
        return session_out(session)

    @api.get("/v1/sessions", response_model=SessionList, tags=["sessions"])
    async def list_sessions(caller: Caller, app_name: IdQuery, user_id: IdQuery,
                            ) -> dict[str, Any]:
        caller.check(app_name)
        infos = await ing.run_io(ing.sessions.list_sessions, app_name, user_id)
        return {"sessions": [vars(i) for i in infos]}

    @api.get("/v1/sessions/{session_id}", response_model=SessionOut, tags=["sessions"])
    async def get_session(session_id: str, caller: Caller, app_name: IdQuery,
                          user_id: IdQuery) -> dict[str, Any]:
        caller.check(app_name)
        return session_out(await ing.run_io(ing.sessions.get_session, app_name, user_id,
                                            session_id))

    @api.post("/v1/sessions/{session_id}/events", response_model=AppendEventsResponse,
              tags=["sessions"], summary="Append events (optimistic: expected_version)")
    async def append_events(session_id: str, body: AppendEventsRequest,
                            caller: Caller) -> dict[str, Any]:
        caller.check(body.app_name)
        events = []
        for i, raw in enumerate(body.events):
            try:
                events.append(Event.from_dict({**raw, "session_id": session_id}))
            except EventError as exc:
                raise EventError(f"events[{i}].{exc}") from exc

        def append() -> dict[str, Any]:
            session = ing.sessions.get_session(body.app_name, body.user_id, session_id)
            if body.expected_version is not None and body.expected_version != session.version:
                raise StaleSessionError(
                    f"expected_version: session {session_id!r} is at version "
                    f"{session.version}, not {body.expected_version}; reload and retry")
            ids = [ing.sessions.append_event(session, e).id for e in events]
            return {"session_id": session_id, "version": session.version, "event_ids": ids}

        return await ing.run_io(append)

    @api.post("/v1/sessions/{session_id}:end", response_model=EndSessionResponse,
              tags=["sessions"], summary="End a session; memory ingestion runs per the "
              "configured trigger before the response")
    async def end_session(session_id: str, body: EndSessionRequest,
                          caller: Caller) -> dict[str, Any]:
        caller.check(body.app_name)
        return await ing.run_io(ing.end_session, body.app_name, body.user_id, session_id)

    # -- compile ------------------------------------------------------------------------
    @api.post("/v1/context:compile", tags=["context"],
              summary="Compile the working context of one model call (CompiledRequest)")
    async def compile_context(body: CompileRequest, caller: Caller) -> dict[str, Any]:
        start = time.perf_counter()
        caller.check(body.app_name)
        out = await ing.compile(body.app_name, body.user_id, body.session_id,
                                body.agent.model_dump(), body.new_message, body.temp_state)
        out["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return out

    # -- artifacts ------------------------------------------------------------------------
    base = "/v1/artifacts/{app_name}/{user_id}/{session_id}"

    @api.put(base + "/{name}", response_model=ArtifactSaved, status_code=201,
             tags=["artifacts"], summary="Save a new version (raw body; Content-Type is "
             "the mime type; ?summary=)")
    async def put_artifact(app_name: str, user_id: str, session_id: str, name: str,
                           request: Request, caller: Caller,
                           summary: Annotated[str, Query(max_length=4_000)] = "",
                           ) -> dict[str, Any]:
        caller.check(app_name)
        data = await request.body()
        mime = request.headers.get("content-type") or DEFAULT_MIME
        version = await ing.run_io(ing.artifacts.save, app_name, user_id, session_id, name,
                                   data, mime, summary)
        art = await ing.run_io(ing.artifacts.load, app_name, user_id, session_id, name,
                               version)
        return {"name": name, "version": version, "handle": art.handle, "size": art.size,
                "mime_type": art.mime_type}

    @api.get(base + "/{name}", tags=["artifacts"], response_class=Response,
             summary="The latest version, or ?version=N (raw body)")
    async def get_artifact(app_name: str, user_id: str, session_id: str, name: str,
                           caller: Caller,
                           version: Annotated[int | None, Query(ge=0)] = None) -> Response:
        caller.check(app_name)
        art = await ing.run_io(ing.artifacts.load, app_name, user_id, session_id, name,
                               version)
        return Response(art.data, media_type=art.mime_type, headers={
            "X-Artifact-Version": str(art.version), "X-Artifact-Handle": art.handle,
            "X-Artifact-Summary": quote(art.summary, safe=" ")})

    @api.get(base + "/{name}/versions", response_model=ArtifactVersions, tags=["artifacts"])
    async def artifact_versions(app_name: str, user_id: str, session_id: str, name: str,
                                caller: Caller) -> dict[str, Any]:
        caller.check(app_name)
        versions = await ing.run_io(ing.artifacts.list_versions, app_name, user_id,
                                    session_id, name)
        if not versions:
            raise ArtifactNotFoundError(f"artifact not found: {name!r}")
        return {"name": name, "versions": versions}

    @api.get(base, response_model=ArtifactNames, tags=["artifacts"])
    async def artifact_names(app_name: str, user_id: str, session_id: str,
                             caller: Caller) -> dict[str, Any]:
        caller.check(app_name)
        return {"names": await ing.run_io(ing.artifacts.list_names, app_name, user_id,
                                          session_id)}

    return api
