"""Artifacts: versioned blobs of a session (or of a user: ``user:`` names).

A payload is served as :mod:`mnemoray.http.artifact_headers` says (a download unless
it is a raster image or plain text). A ``user:`` artifact is read under the session
segment of its handle (``~``) or under one of that user's sessions; any other segment
is a 404, so its content does not answer at every URL one can make up.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from mnemoray.artifacts.store import (
    DEFAULT_MIME,
    USER_SCOPE_SESSION,
    ArtifactNotFoundError,
    is_user_scoped,
)
from mnemoray.http.artifact_headers import artifact_headers
from mnemoray.http.backend import ApiBackend
from mnemoray.http.routes.deps import Backend, Caller
from mnemoray.schemas.sessions import ArtifactNames, ArtifactSaved, ArtifactVersions

router = APIRouter(tags=["artifacts"])
BASE = "/v1/artifacts/{app_name}/{user_id}/{session_id}"


async def _check_user_scope(
    backend: ApiBackend, app_name: str, user_id: str, session_id: str, name: str
) -> None:
    """NotFound unless a ``user:`` name is read under ``~`` or a session of its user.

    The store shares a user's artifact with every session of that user (and the
    inspector reads it under the session it shows); a segment that is no such session
    gets nothing. Writes keep the store's rule: a client may save one under a session it
    has not created yet.
    """
    if not is_user_scoped(name) or session_id == USER_SCOPE_SESSION:
        return
    sessions = await backend.run_io(backend.sessions.list_sessions, app_name, user_id)
    if not any(s.session_id == session_id for s in sessions):
        raise ArtifactNotFoundError(
            f"artifact not found: {name!r} is user-scoped and {session_id!r} is not a "
            f"session of user {user_id!r}; read it under {USER_SCOPE_SESSION!r}",
            field="session_id",
        )


@router.put(
    BASE + "/{name}",
    operation_id="put_artifact",
    response_model=ArtifactSaved,
    status_code=201,
    summary="Save a new version (raw body; Content-Type is the mime type; ?summary=)",
)
async def put_artifact(
    app_name: str,
    user_id: str,
    session_id: str,
    name: str,
    request: Request,
    caller: Caller,
    backend: Backend,
    summary: Annotated[str, Query(max_length=4_000)] = "",
) -> dict[str, Any]:
    caller.check(app_name)
    data = await request.body()
    mime = request.headers.get("content-type") or DEFAULT_MIME
    store = backend.artifacts
    version = await backend.run_io(
        store.save, app_name, user_id, session_id, name, data, mime, summary
    )
    art = await backend.run_io(store.load, app_name, user_id, session_id, name, version)
    return {
        "name": name,
        "version": version,
        "handle": art.handle,
        "size": art.size,
        "mime_type": art.mime_type,
    }


@router.get(
    BASE + "/{name}",
    operation_id="get_artifact",
    response_class=Response,
    summary="The latest version, or ?version=N (raw body)",
)
async def get_artifact(
    app_name: str,
    user_id: str,
    session_id: str,
    name: str,
    caller: Caller,
    backend: Backend,
    version: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    caller.check(app_name)
    # Before the load: the answer under a wrong segment says nothing of what exists.
    await _check_user_scope(backend, app_name, user_id, session_id, name)
    art = await backend.run_io(backend.artifacts.load, app_name, user_id, session_id, name, version)
    return Response(
        art.data,
        headers={
            **artifact_headers(art.name, art.mime_type),
            "X-Artifact-Version": str(art.version),
            "X-Artifact-Handle": art.handle,
            "X-Artifact-Summary": quote(art.summary, safe=" "),
        },
    )


@router.get(
    BASE + "/{name}/versions", response_model=ArtifactVersions, operation_id="artifact_versions"
)
async def artifact_versions(
    app_name: str, user_id: str, session_id: str, name: str, caller: Caller, backend: Backend
) -> dict[str, Any]:
    caller.check(app_name)
    await _check_user_scope(backend, app_name, user_id, session_id, name)
    versions = await backend.run_io(
        backend.artifacts.list_versions, app_name, user_id, session_id, name
    )
    if not versions:
        raise ArtifactNotFoundError(f"artifact not found: {name!r}")
    return {"name": name, "versions": versions}


@router.get(BASE, response_model=ArtifactNames, operation_id="artifact_names")
async def artifact_names(
    app_name: str, user_id: str, session_id: str, caller: Caller, backend: Backend
) -> dict[str, Any]:
    caller.check(app_name)
    return {
        "names": await backend.run_io(backend.artifacts.list_names, app_name, user_id, session_id)
    }
