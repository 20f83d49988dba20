"""``GET /v1/store``: the store's figures, what the doctor finds and the last batch runs
(the memory inspector's health view). Store-wide: open servers and app_wide keys only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from mnemoray.http.auth import NotPermitted
from mnemoray.http.routes.deps import Backend, Caller
from mnemoray.schemas.store import StoreResponse

router = APIRouter(tags=["inspect"])


@router.get(
    "/v1/store",
    operation_id="store_report",
    response_model=StoreResponse,
    summary="Store health: stats, doctor findings, last runs (open server or app_wide key)",
)
async def store_report(caller: Caller, backend: Backend) -> dict[str, Any]:
    if not caller.sees_app_wide:
        # The figures cover every app and user of the store, not only this key's.
        raise NotPermitted(
            'the store report covers every app: it needs a key marked "app_wide": true',
            field="authorization",
        )
    report: dict[str, Any] = await backend.run_io(backend.store_report)
    if caller.apps is not None:  # store-wide totals, but no other tenant's app names
        apps = report["stats"].get("apps") or {}
        report["stats"]["apps"] = {a: n for a, n in apps.items() if a in caller.apps}
    return report
