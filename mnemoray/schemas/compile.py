"""The compile route: the agent, the callee (agents as tools) and the answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from mnemoray import limits
from mnemoray.compiler.callee import MAX_GIVEN_ARTIFACTS
from mnemoray.schemas.common import (
    MAX_BUDGET_TOKENS,
    MAX_MESSAGE_CHARS,
    MAX_TOOLS,
    MAX_TOP_K,
    Id,
    JsonObject,
    RequestModel,
)
from mnemoray.schemas.memories import AgentName

Prompt = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_MESSAGE_CHARS)]
ArtifactRef = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]


class CalleeIn(BaseModel):
    """Compile for an agent called as a tool: it sees ``prompt`` and the ``artifacts``
    (names or artifact:// handles of the session named in the request) only."""

    model_config = ConfigDict(extra="forbid")

    prompt: Prompt
    artifacts: list[ArtifactRef] = Field(default_factory=list, max_length=MAX_GIVEN_ARTIFACTS)


# -- the answer: mnemoray.compiler.CompiledRequest.to_dict() plus took_ms -----------------------
class FunctionCallOut(BaseModel):
    name: str
    args: dict[str, Any]
    id: str


class FunctionResponseOut(BaseModel):
    name: str
    response: Any
    id: str


class PartOut(BaseModel):
    """Exactly one of ``text``, ``function_call`` or ``function_response``."""

    text: str | None = None
    function_call: FunctionCallOut | None = None
    function_response: FunctionResponseOut | None = None


class ContentOut(BaseModel):
    role: Literal["user", "model"]
    parts: list[PartOut]
    event_ids: list[str] = Field(
        default_factory=list, description="the session events this turn was rendered from"
    )
    tokens: int = 0

    @property
    def text(self) -> str:
        """The text parts joined."""
        return "\n".join(p.text for p in self.parts if p.text is not None)


class StepErrorOut(BaseModel):
    step: str
    error: str = Field(description="the error's class name")
    message: str


class TraceStepOut(BaseModel):
    name: str
    tokens_added: int
    micros: int
    detail: dict[str, Any] = Field(default_factory=dict)
    error: StepErrorOut | None = None


class CompiledRequestOut(BaseModel):
    system_instruction: str
    contents: list[ContentOut]
    tools: list[dict[str, Any]]
    static_prefix_tokens: int
    total_tokens: int
    prefix_hash: str
    cacheable_prefix_tokens: int = Field(
        0,
        description="tokens before the first part made "
        "for this call only: what a prefix cache can reuse",
    )
    system_hash: str = ""
    trace: list[TraceStepOut] = Field(
        description="agent_tools, one entry per processor, then cacheable_prefix (its "
        "tokens, the system blocks and contents it spans, and what ends it: ends_before)"
    )
    degraded: list[StepErrorOut] = Field(
        default_factory=list,
        description="steps skipped because an outside source failed (the compile still answered)",
    )
    took_ms: float | None = None


# -- compile -----------------------------------------------------------------------------
class AgentIn(RequestModel):
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
    preload_budget_tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_BUDGET_TOKENS,
        description="the preloaded memories' text fits in this many tokens (default: "
        "preload_top_k alone bounds them)",
    )
    memory_placement: Literal["system", "before_message"] = Field(
        "before_message",
        description="where recalled memories go: just before the new message (the "
        "system instruction stays a cacheable prefix) or into the system instruction",
    )
    tool_result_window: int | None = Field(None, ge=1)
    memory_tools: list[Literal["load_memory", "load_artifacts"]] | None = Field(
        default_factory=list,
        max_length=2,
        description="the compiler's tools this agent opts into (each offered when its "
        "service is configured; load_artifacts brings the artifact listing); "
        "default [] and null: none (the trace says which and why)",
    )
    user_profile: bool = Field(False, description="show the user's profile (GET /v1/profiles)")


class CompileRequest(RequestModel):
    app_name: Id
    user_id: Id
    session_id: Id
    agent: AgentIn
    new_message: Annotated[str, StringConstraints(max_length=MAX_MESSAGE_CHARS)] | None = None
    temp_state: JsonObject | None = None
    callee: CalleeIn | None = Field(
        None,
        description="agents as tools: the agent sees "
        "only this prompt and these artifacts (no new_message)",
    )
    memory_agent: AgentName | None = Field(
        None,
        description="recall the memory block as this agent (default: agent.name); "
        '"": the shared memories only',
    )
    at_event_id: Id | None = Field(
        None,
        description="compile the session as it was right "
        "after this event (an earlier turn); unknown id: 404",
    )
