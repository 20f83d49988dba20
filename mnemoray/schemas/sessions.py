"""Sessions, ingestion jobs and artifacts: requests and answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mnemoray.compaction.fields import BOUNDARY_KINDS, POLICY_FIELDS, BoundaryKind, model_field
from mnemoray.schemas.common import MAX_EVENTS_PER_APPEND, Id, JsonObject, RequestModel

Boundary = BoundaryKind


class SessionCompactionIn(RequestModel):
    """``POST /v1/sessions``'s ``compaction``: this session's policy over its app's. Only
    the fields given apply; ``interval`` / ``token_threshold`` null turn that trigger off.
    Defaults and bounds: mnemoray.compaction.fields."""

    interval: int | None = model_field("interval")
    overlap: int = model_field("overlap")
    token_threshold: int | None = model_field("token_threshold")
    keep_last: int = model_field("keep_last")
    boundaries: list[Boundary] = model_field("boundaries", max_length=len(BOUNDARY_KINDS))
    topic_shift_threshold: float = model_field("topic_shift_threshold")

    def overrides(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


# -- sessions ---------------------------------------------------------------------------
class CreateSessionRequest(RequestModel):
    app_name: Id
    user_id: Id
    session_id: Id | None = None
    state: JsonObject = Field(default_factory=dict)
    compaction: SessionCompactionIn | None = Field(
        None,
        description="this session's compaction policy over its app's: any of "
        f"{', '.join(POLICY_FIELDS)}; "
        "kept as the session's first event (a control event: the session starts at version 1)",
    )


class SessionOut(BaseModel):
    app_name: str
    user_id: str
    session_id: str
    state: dict[str, Any]
    events: list[dict[str, Any]]
    created_at: float
    updated_at: float
    ended_at: float | None = None
    version: int = Field(description="events persisted; pass as expected_version to append")


class SessionInfoOut(BaseModel):
    app_name: str
    user_id: str
    session_id: str
    created_at: float
    updated_at: float
    ended_at: float | None = None
    num_events: int


class SessionList(BaseModel):
    sessions: list[SessionInfoOut]


class AppendEventsRequest(RequestModel):
    app_name: Id
    user_id: Id
    events: list[dict[str, Any]] = Field(
        ...,
        min_length=1,
        max_length=MAX_EVENTS_PER_APPEND,
        description="Event dicts (author, role, type, text, data, state_delta, ...)",
    )
    expected_version: int | None = Field(
        None, ge=0, description="optimistic concurrency: 409 if the session has moved on"
    )


class AppendEventsResponse(BaseModel):
    session_id: str
    version: int
    event_ids: list[str | None] = Field(
        description="one per request event, in order; null for a partial event, which is not stored"
    )
    persisted: list[bool] = Field(
        description="one per request event: false for a partial "
        "(streaming) event, which is never stored; the request's "
        "other events are stored all together or not at all"
    )


class EndSessionRequest(RequestModel):
    app_name: Id
    user_id: Id


class IngestionReport(BaseModel):
    status: Literal["ingested", "unchanged", "failed", "not_run"]
    memories_added: int = 0
    error: str | None = None


class EndSessionResponse(BaseModel):
    """``?wait=true``: the ingestion ran before the answer (200)."""

    session_id: str
    ended_at: float
    ingestion: IngestionReport


class EndSessionAccepted(BaseModel):
    """The default (202): the session is ended and its ingestion job is on disk."""

    session_id: str
    ended_at: float
    job_id: str = Field(description="poll GET /v1/jobs/{job_id}")


# -- ingestion jobs ------------------------------------------------------------------------
class JobOut(BaseModel):
    job_id: str
    status: Literal["queued", "running", "done", "failed"]
    memories_added: int = 0
    error: str | None = Field(
        None,
        description="why a failed job failed; retry it with "
        "POST /v1/jobs/{job_id}:retry (on a queued job: why its last "
        "try failed; it is retried automatically, with backoff)",
    )


class JobAccepted(BaseModel):
    """``POST /v1/memories?wait=false`` with a session: queued on disk (202)."""

    job_id: str
    status: Literal["queued", "running", "done", "failed"]


class RetryJobRequest(RequestModel):
    app_name: Id
    user_id: Id


# -- artifacts ------------------------------------------------------------------------------
class ArtifactSaved(BaseModel):
    name: str
    version: int
    handle: str
    size: int
    mime_type: str


class ArtifactVersions(BaseModel):
    name: str
    versions: list[int]


class ArtifactNames(BaseModel):
    names: list[str]


class SessionRemoved(BaseModel):
    events: int = Field(description="events the session held")
    artifacts: int = Field(description="its own artifacts, every version (not the user's)")
    jobs: int = Field(description="its queued or failed ingestion jobs, cancelled")
    memories: int = Field(description="memories distilled from it, forgotten")


class SessionDeleted(BaseModel):
    session_id: str
    deleted_at: float
    removed: SessionRemoved
