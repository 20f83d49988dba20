"""Liveness and metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from mnemoray.http.metrics import CONTENT_TYPE
from mnemoray.http.routes.deps import Backend, Caller

router = APIRouter(tags=["ops"])


@router.get("/healthz", operation_id="healthz", summary="Liveness (no auth)")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/metrics",
    operation_id="metrics",
    summary="Prometheus metrics of the app",
    response_class=Response,
)
async def metrics(caller: Caller, backend: Backend) -> Response:
    return Response(await backend.metrics.exposition(), media_type=CONTENT_TYPE)
