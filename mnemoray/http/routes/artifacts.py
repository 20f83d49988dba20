"""Artifacts: versioned blobs of a session (or of a user: ``user:`` names)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from mnemoray.artifacts.store import DEFAULT_MIME, ArtifactNotFoundError
from mnemoray.http.routes.deps import Backend, Caller
from mnemoray.schemas.sessions import ArtifactNames, ArtifactSaved, ArtifactVersions

router = APIRouter(tags=["artifacts"])
BASE = "/v1/artifacts/{app_name}/{user_id}/{session_id}"


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
    art = await backend.run_io(backend.artifacts.load, app_name, user_id, session_id, name, version)
    return Response(
        art.data,
        media_type=art.mime_type,
        headers={
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
