"""Background ingestion jobs: their status, and a retry of a failed one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from mnemoray.http.routes.deps import Backend, Caller, IdQuery
from mnemoray.schemas.sessions import JobOut, RetryJobRequest

router = APIRouter(tags=["jobs"])


@router.get(
    "/v1/jobs/{job_id}",
    operation_id="get_job",
    response_model=JobOut,
    summary="An ingestion job: queued | running | done | failed, with counts",
)
async def get_job(
    job_id: str, caller: Caller, backend: Backend, app_name: IdQuery, user_id: IdQuery
) -> dict[str, Any]:
    caller.check(app_name)
    # Scoped to the tenant: another user's job is a 404, like a missing one.
    return await backend.run_io(backend.get_job, app_name, user_id, job_id)


@router.post(
    "/v1/jobs/{job_id}:retry",
    operation_id="retry_job",
    response_model=JobOut,
    status_code=202,
    summary="Queue a failed job again, with the input it kept",
)
async def retry_job(
    job_id: str, body: RetryJobRequest, caller: Caller, backend: Backend
) -> dict[str, Any]:
    caller.check(body.app_name)
    return await backend.run_io(backend.retry_job, body.app_name, body.user_id, job_id)
