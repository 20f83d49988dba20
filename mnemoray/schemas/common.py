"""What every HTTP model shares: size limits, ids, kinds, times, JSON objects, the
strict request base and the error body (conventions: ``mnemoray.schemas``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from mnemoray import limits
from mnemoray.memory.records.kinds import MEMORY_KINDS

MAX_ID_CHARS = 256
#: What an id may not hold: control characters (``\x1f`` separates the graph and shard keys).
ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
#: One item of a memory's topics, facts or entities (``Short``; a list holds MAX_LIST_ITEMS).
MAX_SHORT_CHARS = 1_000
MAX_QUERY_CHARS = 2_000
MAX_TOP_K = 100
MAX_BUDGET_TOKENS = 1_000_000  # a recall's token budget (budget_tokens)
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
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
Kind = Literal["session_summary", "fact", "chunk", "compaction_summary", "consolidated_summary"]
assert set(Kind.__args__) == set(MEMORY_KINDS)  # type: ignore[attr-defined]
Mode = Literal["hybrid", "dense", "keyword"]
Short = Annotated[str, StringConstraints(max_length=MAX_SHORT_CHARS)]
# Epoch seconds in the range every later step can represent (mnemoray.limits.check_time).
Time = Annotated[float, Field(ge=limits.TIME_MIN, lt=limits.TIME_MAX, allow_inf_nan=False)]
Timestamp = Time | Annotated[str, StringConstraints(max_length=64)]


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    limits.json_object_bytes(value, "")  # NaN / Infinity / lone surrogates: naming the key
    return value


# A free-form object stored or answered as JSON: JSON as the standard defines it.
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- errors -----------------------------------------------------------------------------------
class ErrorBody(BaseModel):
    status: int
    message: str = Field(description="what is wrong, naming the field")
    field: str | None = Field(
        None, description="the invalid or unknown input, e.g. `events[2].role`"
    )
    request_id: str | None = Field(
        None,
        description="also in the X-Request-ID header; quote it to find the server's log of a 500",
    )


class ErrorResponse(BaseModel):
    error: ErrorBody
