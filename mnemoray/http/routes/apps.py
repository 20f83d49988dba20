"""``GET /v1/apps``: the apps (and, for who may see them, the users) with memories or
sessions: where the memory inspector starts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from mnemoray.http.routes.deps import Backend, Caller
from mnemoray.schemas.store import AppsResponse

router = APIRouter(tags=["inspect"])


@router.get(
    "/v1/apps",
    operation_id="list_apps",
    response_model=AppsResponse,
    summary="The apps this key may use that have memories or sessions (with their "
    "users for an open server or an app_wide key)",
)
async def list_apps(caller: Caller, backend: Backend) -> dict[str, Any]:
    # Only the caller's apps are read: another tenant's app is not even named.
    found: dict[str, Any] = await backend.run_io(backend.tenants, caller.apps)
    if not caller.sees_app_wide:  # an app's users are app-wide knowledge
        for app in found["apps"]:
            app["users"], app["users_truncated"] = None, False
    return found
