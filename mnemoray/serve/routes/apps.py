"""``GET /v1/apps``: the apps (and, for who may see them, the users) with memories or
sessions: where the memory inspector starts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from mnemoray.schemas.store import AppsResponse
from mnemoray.serve.auth import Principal
from mnemoray.serve.routes.deps import Backend, Caller

router = APIRouter(tags=["inspect"])


def sees_users(caller: Principal) -> bool:
    """Listing an app's users is app-wide knowledge: an open (loopback) server, or a key
    marked ``app_wide``, as for app-wide recall."""
    return caller.apps is None or caller.app_wide


@router.get("/v1/apps", operation_id="list_apps", response_model=AppsResponse,
            summary="The apps this key may use that have memories or sessions (with their "
            "users for an open server or an app_wide key)")
async def list_apps(caller: Caller, backend: Backend) -> dict[str, Any]:
    tenants: dict[str, dict[str, int]] = await backend.run_io(backend.tenants)
    listed = sees_users(caller)
    apps = []
    for app, users in tenants.items():
        if caller.apps is not None and app not in caller.apps:
            continue  # another tenant's app: not even its name
        apps.append({"app_name": app, "memories": sum(users.values()),
                     "users": [{"user_id": u, "memories": n} for u, n in users.items()]
                     if listed else None})
    return {"apps": apps}
