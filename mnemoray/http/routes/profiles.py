"""A user's profile and an app's domain index (docs/profiles.md).

The profile is the user's own (the key must reach the app, like every route); the
domain index reads across the app's users, so it takes a key marked ``app_wide``, as
``POST /v1/apps/{app}/recall`` does (403 for a user-facing key).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from mnemoray.http.routes.deps import Backend, Caller, elapsed_ms
from mnemoray.schemas.common import MAX_ID_CHARS
from mnemoray.schemas.profiles import DomainResponse, ProfileResponse

router = APIRouter(tags=["profiles"])
PathId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)]


@router.get(
    "/v1/profiles/{app_name}/{user_id}",
    operation_id="profile",
    response_model=ProfileResponse,
    summary="A user's profile",
)
async def profile(
    app_name: PathId, user_id: PathId, caller: Caller, backend: Backend
) -> JSONResponse:
    start = time.perf_counter()
    caller.check(app_name)
    out = await backend.memory_op("profile", app_name, user_id)
    out["took_ms"] = elapsed_ms(start)
    return JSONResponse(out)


@router.get(
    "/v1/domains/{app_name}",
    operation_id="domain",
    response_model=DomainResponse,
    summary="An app's domain index (app-wide keys only)",
)
async def domain(app_name: PathId, caller: Caller, backend: Backend) -> JSONResponse:
    start = time.perf_counter()
    # Tenant isolation: it reads every user of the app, as app-wide recall does.
    caller.check_app_wide(app_name)
    out = await backend.domain(app_name)
    out["took_ms"] = elapsed_ms(start)
    return JSONResponse(out)
