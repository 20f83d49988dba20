"""The memory inspector's store-wide answers: ``GET /v1/apps`` and ``GET /v1/store``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: How many users ``GET /v1/apps`` lists per app (by name; ``users_truncated`` says
#: there are more): the page picks one from a list, and the answer stays small.
MAX_USERS = 1000


class UserCount(BaseModel):
    user_id: str
    memories: int = Field(description="live memories (0: only sessions so far)")


class AppOut(BaseModel):
    app_name: str
    memories: int = Field(description="live memories of all its users")
    users: list[UserCount] | None = Field(
        description=f"its users by name, the first {MAX_USERS}; null unless the server is open or "
        "the key is app_wide (ask the user for a user id then)"
    )
    users_truncated: bool = Field(
        False,
        description="the app has more users than listed (ask for a user id to reach the others)",
    )


class AppsResponse(BaseModel):
    apps: list[AppOut] = Field(
        description="the apps the caller may use that have memories or sessions, by name"
    )
    skipped_shards: list[int] = Field(
        default_factory=list,
        description="damaged shards (their files unreadable) that "
        "were skipped: their users and memories are missing from the counts; `GET "
        "/v1/store` says what is wrong",
    )


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
    stats: dict[str, Any] = Field(
        description="`mnemoray stats`: memories per kind and app, "
        "users, shards, segments, rows, bytes, the model; with "
        "`partial` true the figures leave out `damaged_shards` "
        "(the doctor says what is wrong with them)"
    )
    doctor: DoctorOut
    runs: list[RunOut] = Field(description="the last batch runs, newest first")
