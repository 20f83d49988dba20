"""The memory inspector's store-wide answers: ``GET /v1/apps`` and ``GET /v1/store``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class UserCount(BaseModel):
    user_id: str
    memories: int = Field(description="live memories (0: only sessions so far)")


class AppOut(BaseModel):
    app_name: str
    memories: int = Field(description="live memories of all its users")
    users: list[UserCount] | None = Field(
        description="its users; null unless the server is open or the key is app_wide "
                    "(ask the user for a user id then)")


class AppsResponse(BaseModel):
    apps: list[AppOut] = Field(description="the apps the caller may use that have "
                               "memories or sessions, by name")


class DoctorOut(BaseModel):
    healthy: bool
    problems: list[str] = Field(description="one line per problem `mnemoray doctor` finds")
    checked: bool = Field(True, description="false: the doctor reads Parquet stores only")
    note: str | None = Field(None, description="why nothing was checked")


class RunOut(BaseModel):
    run_id: str | None = None
    kind: str | None = None
    status: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    seconds: float | None = None
    throughput: dict[str, float] | None = None
    stage_seconds: dict[str, float] | None = None
    counts: dict[str, int] | None = None


class StoreResponse(BaseModel):
    stats: dict[str, Any] = Field(description="`mnemoray stats`: memories per kind and app, "
                                  "users, shards, segments, rows, bytes, the model")
    doctor: DoctorOut
    runs: list[RunOut] = Field(description="the last batch runs, newest first")
