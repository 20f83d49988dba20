"""Recall and memories: requests and answers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from mnemoray.errors import InvalidInput
from mnemoray.memory.records.agent_names import check_agent_name
from mnemoray.memory.records.kinds import MEMORY_KINDS
from mnemoray.schemas.common import (
    MAX_BUDGET_TOKENS,
    MAX_LIST_ITEMS,
    MAX_MEMORIES_PER_ADD,
    MAX_MEMORY_TEXT_CHARS,
    MAX_QUERY_CHARS,
    MAX_SESSION_EVENTS,
    MAX_TOP_K,
    Id,
    JsonObject,
    Kind,
    Mode,
    RequestModel,
    Short,
    Time,
    Timestamp,
)

CONSOLIDATED_KIND = "consolidated_summary"  # hygiene.consolidate's (kept light here)
# The ids a posted session carries itself, held to the rule of the request's own (Id).
SESSION_IDS = ("app_name", "user_id", "session_id")
_ID = TypeAdapter(Id)


def _agent_name(value: str) -> str:
    try:
        return check_agent_name(value)
    except InvalidInput as exc:  # pydantic reports a ValueError as the field's message
        raise ValueError(exc.reason) from None


# Who owns an agent-only memory, or whose view a recall is (mnemoray.memory.store.scopes).
AgentName = Annotated[str, StringConstraints(max_length=128), AfterValidator(_agent_name)]
AGENT_NAME_DOC = (
    "the agent whose view this is: the shared memories plus its own "
    "agent-only ones (default: the shared ones only)"
)


# -- recall --------------------------------------------------------------------------
class RecallFiltersIn(RequestModel):
    session_id: Id | None = None
    after: Timestamp | None = Field(None, description="epoch seconds or ISO-8601, inclusive")
    before: Timestamp | None = Field(None, description="epoch seconds or ISO-8601, inclusive")
    kinds: list[Kind] | None = Field(None, min_length=1, max_length=len(MEMORY_KINDS))
    reference_time: Timestamp | None = Field(
        None,
        description="not a filter: the time a "
        'query\'s relative times ("last May") are read '
        "against; default: now",
    )


EXPLAIN_DOC = (
    "each result with `contributions`: what each signal added to the fused "
    "score (score = 1 + their sum)"
)


BUDGET_DOC = (
    "the results' text fits in this many tokens: the best records that fit, none "
    "repeating another (default: top_k alone bounds them)"
)


class RecallRequest(RequestModel):
    app_name: Id
    user_id: Id
    query: Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)]
    top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    filters: RecallFiltersIn | None = None
    mode: Mode | None = Field(None, description="default: the server's (hybrid)")
    agent_name: AgentName | None = Field(None, description=AGENT_NAME_DOC)
    explain: bool = Field(False, description=EXPLAIN_DOC)
    budget_tokens: int | None = Field(None, ge=1, le=MAX_BUDGET_TOKENS, description=BUDGET_DOC)

    def filter_dict(self) -> dict[str, object] | None:
        """The filters as the backend takes them, the agent's view included."""
        return with_agent(self.filters, self.agent_name)


def with_agent(
    filters: RecallFiltersIn | None,
    agent_name: str | None,
) -> dict[str, object] | None:
    out = filters.model_dump(exclude_none=True) if filters else {}
    if agent_name:
        out["agent_name"] = agent_name
    return out or None


class Provenance(BaseModel):
    session_id: str
    source_event_ids: list[str]
    event_time_start: float | None = None
    event_time_end: float | None = None
    created_at: float | None = None


class StatedFact(BaseModel):
    relation: str = Field(description="the typed relation, e.g. lives_in, works_at")
    subject: str
    object: str
    valid_from: str | None = Field(
        None, description="when it began to hold (ISO-8601, UTC; null: unknown)"
    )
    valid_to: str | None = Field(
        None, description="when it stopped holding (null: still holds or unknown)"
    )
    holds: bool = Field(description="no later fact closed it")


class RecalledMemory(BaseModel):
    memory_id: str
    app_name: str | None = Field(
        None,
        description="the app that owns it: the one "
        "recalled, or one that shares the user's memories with it",
    )
    agent_name: str | None = Field(
        None, description="set on an agent-only memory: the agent it belongs to"
    )
    kind: str
    text: str
    score: float
    date: str | None = Field(
        None, description="when the remembered events happened (ISO-8601, UTC)"
    )
    signals: dict[str, int | float] = Field(
        description="raw value of each signal and its rank (<signal>_rank, 1 = best)"
    )
    axes: list[str] = Field(
        default_factory=list,
        description="the recall axes that found or raised it: dense, bm25, entity, graph, time",
    )
    facts: list[StatedFact] = Field(
        default_factory=list,
        description="the typed facts it states and their validity (users with an entity graph)",
    )
    contributions: dict[str, float] | None = Field(
        None, description="with explain: what each signal added to the score"
    )
    in_place_of: str | None = Field(
        None,
        description="a chunk shown in the place of a better-ranked fact (or summary) of "
        "its session whose words it holds: that record's memory_id (score and signals "
        "are that record's)",
    )
    joined: list[str] = Field(
        default_factory=list,
        description="a long turn's parts shown as one passage: the memory_ids of the "
        "parts joined to this one (its text holds them all, in order)",
    )
    topics: list[str] = []
    key_facts: list[str] = []
    open_threads: list[str] = Field(
        default_factory=list,
        description="questions or tasks the summarized conversation left open",
    )
    decisions: list[str] = []
    commitments: list[str] = []
    provenance: Provenance


class RecallResponse(BaseModel):
    memories: list[RecalledMemory]
    took_ms: float
    store_version: int


class AppRecallRequest(RequestModel):
    """App-wide recall (``POST /v1/apps/{app_name}/recall``): every user of the app."""

    query: Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)]
    top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    filters: RecallFiltersIn | None = None
    mode: Mode | None = Field(None, description="default: the server's (hybrid)")
    agent_name: AgentName | None = Field(None, description=AGENT_NAME_DOC)

    def filter_dict(self) -> dict[str, object] | None:
        return with_agent(self.filters, self.agent_name)


class AppRecalledMemory(RecalledMemory):
    user_id: str = Field(description="whose memory it is")


class AppRecallResponse(BaseModel):
    memories: list[AppRecalledMemory]
    took_ms: float
    store_version: int


# -- memories -------------------------------------------------------------------------
class MemoryIn(RequestModel):
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
    agent_name: AgentName | None = Field(
        None,
        description="only this agent's recall sees "
        "it (default: the request's agent_name, else "
        "every agent of the app)",
    )

    @field_validator("kind")
    @classmethod
    def _not_a_summary(cls, kind: str) -> str:
        # Written by consolidation only: a posted one would get its "sources" ledgered
        # as merged, and forgotten as consolidated by the next run.
        if kind == CONSOLIDATED_KIND:
            raise ValueError(
                f"{CONSOLIDATED_KIND!r} records are written by consolidation "
                f"only; post another kind"
            )
        return kind


class AddMemoriesRequest(RequestModel):
    """Either a whole ``session`` (the archive's session dict: distilled,
    embedded and committed like a backfill would) or raw ``memories``."""

    app_name: Id
    user_id: Id
    session: JsonObject | None = None
    memories: list[MemoryIn] | None = Field(None, min_length=1, max_length=MAX_MEMORIES_PER_ADD)
    agent_name: AgentName | None = Field(
        None,
        description="whose memories these are: "
        "only that agent's recall sees them (a session's: "
        "default as the app's scopes.memory_scope says; "
        "memories': default shared by every agent)",
    )

    @model_validator(mode="after")
    def _one_of(self) -> AddMemoriesRequest:
        if (self.session is None) == (self.memories is None):
            raise ValueError("pass exactly one of 'session' or 'memories'")
        if self.session is not None:
            events = self.session.get("events") or []
            if isinstance(events, list) and len(events) > MAX_SESSION_EVENTS:
                raise ValueError(f"session.events: at most {MAX_SESSION_EVENTS} events")
        return self

    def check_session(self) -> None:
        """The posted session's ids follow the id rule of the request's own (``Id``: no
        control characters, bounded) and its ``app_name`` / ``user_id``, when given,
        are the request's: :class:`InvalidInput` naming ``session.<id>``. One check for
        ``wait=true`` and ``wait=false`` alike, before anything is queued or stored.
        (A method, not a validator: pydantic would drop the inner field's name.)"""
        if self.session is None:
            return
        request = {"app_name": self.app_name, "user_id": self.user_id}
        for name in SESSION_IDS:
            value: Any = self.session.get(name)
            if value is None and name in request:
                continue  # filled in from the request
            field = f"session.{name}"
            try:
                _ID.validate_python(value, strict=True)
            except ValidationError as exc:
                reason = exc.errors()[0]["msg"] if value is not None else "required"
                raise InvalidInput(reason, field=field) from None
            if name in request and value != request[name]:
                raise InvalidInput(
                    f"{value!r} does not match {name} {request[name]!r} of the request",
                    field=field,
                )


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
    edited_at: float | None = Field(
        None, description="when this text was written by an edit (PATCH); null: never edited"
    )
    edited_by: str | None = Field(
        None,
        description="who wrote this text: `key:<id>` of "
        "the API key, or `local`, plus the request's `actor`",
    )
    previous_versions: list[MemoryVersionOut] = Field(
        default_factory=list, description="the texts this one replaced, oldest first"
    )
    agent_name: str = Field(
        "", description="the agent it belongs to; empty: every agent of the app sees it"
    )


class AddMemoriesResponse(BaseModel):
    added: int = Field(
        description="memory rows really written by this request (records "
        "already stored are not counted: see `duplicates`)"
    )
    duplicates: int = Field(
        0,
        description="records of this request already stored (or "
        "repeated in it): nothing was written for them",
    )
    status: Literal["added", "unchanged", "older_copy"] | None = Field(
        None,
        description="`added`: something was written; `unchanged`: nothing new (this "
        "content was already stored, e.g. the same session posted again); `older_copy`: the "
        "store holds a newer copy of this session (more events, or as many and a later "
        "`updated_at`), which stays: the posted copy is recorded but replaces nothing",
    )
    memories: list[MemoryOut] = Field(description="the records written, as stored")
    took_ms: float


class MemoryPage(BaseModel):
    memories: list[MemoryOut]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null on the last page"
    )


class ForgetResponse(BaseModel):
    forgotten: int
