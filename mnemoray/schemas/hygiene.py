"""Request and response models of memory hygiene: corrections, versions, forget by
query with a preview, and forget records (limits and conventions: ``mnemoray.schemas``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from mnemoray.limits import MAX_FORGET_PREVIEW
from mnemoray.schemas.common import MAX_MEMORY_TEXT_CHARS, MAX_QUERY_CHARS, Id, Mode, RequestModel
from mnemoray.schemas.memories import MemoryOut, RecalledMemory, RecallFiltersIn

MAX_REASON_CHARS = 500
Reason = Annotated[str, StringConstraints(max_length=MAX_REASON_CHARS)]
Actor = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
]


class EditMemoryRequest(RequestModel):
    app_name: Id
    user_id: Id
    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_MEMORY_TEXT_CHARS)]
    actor: Actor | None = Field(
        None,
        description="who asks for the change (e.g. the end "
        "user); recorded after the API key: `key:<id> (<actor>)`",
    )


class EditMemoryResponse(BaseModel):
    memory: MemoryOut = Field(
        description="the corrected memory (a new `memory_id`; the old "
        "one is in `previous_versions` and still finds it)"
    )
    replaced: str = Field(description="the memory_id the edit replaced")


class MemoryVersionItem(BaseModel):
    memory_id: str
    text: str
    written_at: float
    written_by: str
    current: bool


class MemoryVersions(BaseModel):
    memory_id: str = Field(description="the current id of the memory")
    versions: list[MemoryVersionItem] = Field(description="oldest first; the last is current")


class ForgetRecord(BaseModel):
    scope: str
    version: int
    at: float
    memory_id: str = ""
    session_id: str = ""
    reason: str = ""
    actor: str = ""


class ForgetRecords(BaseModel):
    records: list[ForgetRecord] = Field(
        description="this user's forget records still in "
        "the store, oldest first (a compaction retires "
        "those whose rows it dropped)"
    )


class ForgetByQueryRequest(RequestModel):
    """``dry_run: true`` with a ``query``: what would be forgotten, and a
    ``confirm_token``. Then ``confirm: <token>`` (no query): exactly those memories (or
    the subset ``memory_ids``) are forgotten."""

    app_name: Id
    user_id: Id
    query: Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)] | None = None
    top_k: int = Field(10, ge=1, le=MAX_FORGET_PREVIEW)
    mode: Mode | None = None
    filters: RecallFiltersIn | None = None
    dry_run: bool = False
    confirm: Annotated[str, StringConstraints(min_length=1, max_length=16_384)] | None = None
    memory_ids: list[Id] | None = Field(None, min_length=1, max_length=MAX_FORGET_PREVIEW)
    reason: Reason = ""
    actor: Actor | None = None


class ForgetPreviewOut(BaseModel):
    dry_run: bool = True
    query: str
    memory_ids: list[str]
    memories: list[RecalledMemory]
    confirm_token: str = Field(description="pass as `confirm` to forget exactly these")
    expires_at: float


class ForgetConfirmed(BaseModel):
    forgotten: int
    memory_ids: list[str]


class UserRemoved(BaseModel):
    jobs: int = Field(description="queued or failed ingestion jobs, cancelled")
    sessions: int
    events: int = Field(description="events those sessions held")
    artifacts: int = Field(description="artifacts of every session and the user's own")
    memories: int = Field(description="live memories forgotten")


class UserErased(BaseModel):
    """What a full erasure removed (zeros for what an earlier one already did). Its
    record is the ``user`` forget record (``GET /v1/memories/forgotten``)."""

    app_name: str
    user_id: str
    erased_at: float
    removed: UserRemoved
