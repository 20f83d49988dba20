"""Request and response models of the HTTP API, with their size limits.

Every request model forbids unknown fields, so a typo ("topk") is a 422 naming
the field rather than a silently applied default. Limits are module constants
(documented in the OpenAPI schema through the field constraints); the whole body
is capped separately (``ServeSettings.max_body_bytes`` -> 413).

Convention for tenant fields: requests with a JSON body (POST/PUT) carry
``app_name`` and ``user_id`` in the body; GET and DELETE carry them in the path
or the query string. Artifacts are addressed by path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from mnemoray import limits
from mnemoray.memory.record import MEMORY_KINDS
from serve.compaction_settings import SessionCompactionIn
from serve.compile_schemas import CalleeIn

MAX_ID_CHARS = 256
MAX_QUERY_CHARS = 2_000
MAX_TOP_K = 100
MAX_MEMORIES_PER_ADD = 256
MAX_LIST_ITEMS = 64
MAX_EVENTS_PER_APPEND = 100
MAX_PAGE = 500
MAX_TOOLS = 64
# The limits shared with the batch path (archive rows): one place, mnemoray.limits.
MAX_MEMORY_TEXT_CHARS = limits.MAX_MEMORY_TEXT_CHARS
MAX_SESSION_EVENTS = limits.MAX_SESSION_EVENTS
MAX_MESSAGE_CHARS = limits.MAX_MESSAGE_CHARS

# Ids: non-empty, bounded, no control characters (they end up in file names and logs).
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS,
                                      pattern=r"^[^\x00-\x1f\x7f]+$")]
Kind = Literal["session_summary", "fact", "chunk", "compaction_summary", "consolidated_summary"]
assert set(Kind.__args__) == set(MEMORY_KINDS)  # type: ignore[attr-defined]
Mode = Literal["hybrid", "dense", "keyword"]
Short = Annotated[str, StringConstraints(max_length=1_000)]
# Epoch seconds in the range every later step can represent (mnemoray.limits.check_time).
Time = Annotated[float, Field(ge=limits.TIME_MIN, lt=limits.TIME_MAX, allow_inf_nan=False)]
Timestamp = Time | Annotated[str, StringConstraints(max_length=64)]


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    limits.json_object_bytes(value, "")  # NaN / Infinity / lone surrogates: naming the key
    return value


# A free-form object stored or answered as JSON: JSON as the standard defines it.
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- recall --------------------------------------------------------------------------
class RecallFiltersIn(_Request):
    session_id: Id | None = None
    after: Timestamp | None = Field(None, description="epoch seconds or ISO-8601, inclusive")
    before: Timestamp | None = Field(None, description="epoch seconds or ISO-8601, inclusive")
    kinds: list[Kind] | None = Field(None, min_length=1, max_length=len(MEMORY_KINDS))


class RecallRequest(_Request):
    app_name: Id
    user_id: Id
    query: Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)]
    top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    filters: RecallFiltersIn | None = None
    mode: Mode | None = Field(None, description="default: the server's (hybrid)")


class Provenance(BaseModel):
    session_id: str
    source_event_ids: list[str]
    event_time_start: float | None = None
    event_time_end: float | None = None
    created_at: float | None = None


class RecalledMemory(BaseModel):
    memory_id: str
    kind: str
    text: str
    score: float
    date: str | None = Field(None, description="when the remembered events happened "
                             "(ISO-8601, UTC)")
    signals: dict[str, int | float] = Field(description="raw value of each signal and its rank "
                                      "(<signal>_rank, 1 = best)")
    topics: list[str] = []
    key_facts: list[str] = []
    open_threads: list[str] = Field(default_factory=list, description="questions or tasks "
                                    "the summarized conversation left open (seed 004)")
    decisions: list[str] = []
    commitments: list[str] = []
    provenance: Provenance


class RecallResponse(BaseModel):
    memories: list[RecalledMemory]
    took_ms: float
    store_version: int


# -- memories -------------------------------------------------------------------------
class MemoryIn(_Request):
    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_MEMORY_TEXT_CHARS)]
    session_id: Id = "online"
    kind: Kind = "fact"
    memory_id: Id | None = None
    key_text: Annotated[str, StringConstraints(max_length=MAX_MEMORY_TEXT_CHARS)] | None = None
    topics: list[Short] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    key_facts: list[Short] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    entities: list[Short] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    source_event_ids: list[Id] = Field(default_factory=list, max_length=1_000)
    event_time_start: Time | None = None
    event_time_end: Time | None = None
    expires_at: Time | None = None


class AddMemoriesRequest(_Request):
    """Either a whole ``session`` (the archive's session dict: distilled,
    embedded and committed like a backfill would) or raw ``memories``."""

    app_name: Id
    user_id: Id
    session: JsonObject | None = None
    memories: list[MemoryIn] | None = Field(None, min_length=1, max_length=MAX_MEMORIES_PER_ADD)

    @model_validator(mode="after")
    def _one_of(self) -> AddMemoriesRequest:
        if (self.session is None) == (self.memories is None):
            raise ValueError("pass exactly one of 'session' or 'memories'")
        if self.session is not None:
            events = self.session.get("events") or []
            if isinstance(events, list) and len(events) > MAX_SESSION_EVENTS:
                raise ValueError(f"session.events: at most {MAX_SESSION_EVENTS} events")
        return self


class MemoryVersionOut(BaseModel):
    memory_id: str
    text: str
    written_at: float
    written_by: str = ""


class MemoryOut(BaseModel):
    memory_id: str
    app_name: str
    user_id: str
    session_id: str
    kind: str
    text: str
    topics: list[str] = []
    key_facts: list[str] = []
    entities: list[str] = []
    source_event_ids: list[str] = []
    event_time_start: float | None = None
    event_time_end: float | None = None
    created_at: float | None = None
    expires_at: float | None = None
    open_threads: list[str] = []
    decisions: list[str] = []
    commitments: list[str] = []
    edited_at: float | None = Field(None, description="when this text was written by an "
                                    "edit (PATCH); null: never edited")
    edited_by: str | None = Field(None, description="who wrote this text: `key:<id>` of "
                                  "the API key, or `local`, plus the request's `actor`")
    previous_versions: list[MemoryVersionOut] = Field(
        default_factory=list, description="the texts this one replaced, oldest first")


class AddMemoriesResponse(BaseModel):
    added: int = Field(description="memory rows really written by this request (records "
                       "already stored are not counted: see `duplicates`)")
    duplicates: int = Field(0, description="records of this request already stored (or "
                            "repeated in it): nothing was written for them")
    status: Literal["added", "unchanged", "older_copy"] | None = Field(
        None, description="`added`: something was written; `unchanged`: nothing new (this "
        "content was already stored, e.g. the same session posted again); `older_copy`: the "
        "store holds a newer copy of this session (more events, or as many and a later "
        "`updated_at`), which stays: the posted copy is recorded but replaces nothing")
    memories: list[MemoryOut] = Field(description="the records written, as stored")
    took_ms: float


class MemoryPage(BaseModel):
    memories: list[MemoryOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; "
                                    "null on the last page")


class ForgetResponse(BaseModel):
    forgotten: int


# -- sessions ---------------------------------------------------------------------------
class CreateSessionRequest(_Request):
    app_name: Id
    user_id: Id
    session_id: Id | None = None
    state: JsonObject = Field(default_factory=dict)
    compaction: SessionCompactionIn | None = Field(
        None, description="this session's compaction policy over its app's: any of "
        "interval, overlap, token_threshold, keep_last, boundaries, topic_shift_threshold; "
        "kept as the session's first event (a control event: the session starts at version 1)")


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


class AppendEventsRequest(_Request):
    app_name: Id
    user_id: Id
    events: list[dict[str, Any]] = Field(..., min_length=1, max_length=MAX_EVENTS_PER_APPEND,
                                         description="Event dicts (author, role, type, text, "
                                         "data, state_delta, ...)")
    expected_version: int | None = Field(None, ge=0, description="optimistic concurrency: "
                                         "409 if the session has moved on")


class AppendEventsResponse(BaseModel):
    session_id: str
    version: int
    event_ids: list[str | None] = Field(description="one per request event, in order; null "
                                        "for a partial event, which is not stored")
    persisted: list[bool] = Field(description="one per request event: false for a partial "
                                  "(streaming) event, which is never stored; the request's "
                                  "other events are stored all together or not at all")


class EndSessionRequest(_Request):
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
    error: str | None = Field(None, description="why a failed job failed; retry it with "
                              "POST /v1/jobs/{job_id}:retry (on a queued job: why its last "
                              "try failed; it is retried automatically, with backoff)")


class JobAccepted(BaseModel):
    """``POST /v1/memories?wait=false`` with a session: queued on disk (202)."""

    job_id: str
    status: Literal["queued", "running", "done", "failed"]


class RetryJobRequest(_Request):
    app_name: Id
    user_id: Id


# -- compile -----------------------------------------------------------------------------
class AgentIn(_Request):
    """The fields of ``mnemoray.compiler.AgentSpec``."""

    name: Id
    description: Annotated[str, StringConstraints(max_length=MAX_MESSAGE_CHARS)] = ""
    static_instruction: Annotated[str, StringConstraints(max_length=200_000)] = ""
    instruction: Annotated[str, StringConstraints(max_length=200_000)] = ""
    include_contents: Literal["default", "none"] = "default"
    token_budget: int | None = Field(None, ge=1)
    tools: list[JsonObject] = Field(default_factory=list, max_length=MAX_TOOLS)
    memory_preload: bool = False
    preload_top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    memory_placement: Literal["system", "before_message"] = "system"
    tool_result_window: int | None = Field(None, ge=1)


class CompileRequest(_Request):
    app_name: Id
    user_id: Id
    session_id: Id
    agent: AgentIn
    new_message: Annotated[str, StringConstraints(max_length=MAX_MESSAGE_CHARS)] | None = None
    temp_state: JsonObject | None = None
    callee: CalleeIn | None = Field(None, description="agents as tools: the agent sees "
                                    "only this prompt and these artifacts (no new_message)")


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


# -- errors -----------------------------------------------------------------------------------
class ErrorBody(BaseModel):
    status: int
    message: str = Field(description="what is wrong, naming the field")
    field: str | None = Field(None, description="the invalid or unknown input, e.g. "
                              "`events[2].role`")
    request_id: str | None = Field(None, description="also in the X-Request-ID header; "
                                   "quote it to find the server's log of a 500")


class ErrorResponse(BaseModel):
    error: ErrorBody
