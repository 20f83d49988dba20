"""What the compiler produces: a model-agnostic request for one model call.

Parts and contents are frozen so the history processor can memoise the
rendering of an immutable event and share it between compiles safely.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

ContentRole = Literal["user", "model"]

# The classes below are built once per rendered event (a call or response once per
# tool event). Their constructors are written out because the generated frozen ones
# look ``object.__setattr__`` up again for every field (a quarter of the rendering's
# cost); same fields, same defaults, same behaviour.
_set = object.__setattr__


@dataclass(frozen=True, slots=True, init=False)
class FunctionCall:
    name: str
    args: dict[str, Any]
    id: str

    def __init__(self, name: str, args: dict[str, Any], id: str) -> None:
        _set(self, "name", name)
        _set(self, "args", args)
        _set(self, "id", id)


@dataclass(frozen=True, slots=True, init=False)
class FunctionResponse:
    name: str
    response: Any
    id: str

    def __init__(self, name: str, response: Any, id: str) -> None:
        _set(self, "name", name)
        _set(self, "response", response)
        _set(self, "id", id)


@dataclass(frozen=True, slots=True, init=False)
class Part:
    """Exactly one of text, function_call or function_response."""

    text: str | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None

    def __init__(
        self,
        text: str | None = None,
        function_call: FunctionCall | None = None,
        function_response: FunctionResponse | None = None,
    ) -> None:
        _set(self, "text", text)
        _set(self, "function_call", function_call)
        _set(self, "function_response", function_response)

    def to_dict(self) -> dict[str, Any]:
        if self.function_call is not None:
            call = self.function_call
            return {"function_call": {"name": call.name, "args": call.args, "id": call.id}}
        if self.function_response is not None:
            resp = self.function_response
            return {
                "function_response": {"name": resp.name, "response": resp.response, "id": resp.id}
            }
        return {"text": self.text or ""}


@dataclass(frozen=True, slots=True, init=False)
class Content:
    """One turn of the conversation as the model sees it.

    ``event_ids`` are the session events it was rendered from (empty for the
    new message and per-call inserts); ``tokens`` is the estimated size of its
    parts, kept so token totals never need a recount.
    """

    role: ContentRole
    parts: tuple[Part, ...]
    event_ids: tuple[str, ...] = ()
    tokens: int = 0

    def __init__(
        self,
        role: ContentRole,
        parts: tuple[Part, ...],
        event_ids: tuple[str, ...] = (),
        tokens: int = 0,
    ) -> None:
        _set(self, "role", role)
        _set(self, "parts", parts)
        _set(self, "event_ids", event_ids)
        _set(self, "tokens", tokens)

    @property
    def text(self) -> str:
        """The text parts joined (convenience for tests and logs)."""
        return "\n".join(p.text for p in self.parts if p.text is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "parts": [p.to_dict() for p in self.parts],
            "event_ids": list(self.event_ids),
            "tokens": self.tokens,
        }


_new = object.__new__
# The slots' own setters: what the constructors above call through ``object.__setattr__``
# (which looks each one up by name first).
_set_text = Part.__dict__["text"].__set__
_set_call = Part.__dict__["function_call"].__set__
_set_response = Part.__dict__["function_response"].__set__
_set_role = Content.__dict__["role"].__set__
_set_parts = Content.__dict__["parts"].__set__
_set_ids = Content.__dict__["event_ids"].__set__
_set_tokens = Content.__dict__["tokens"].__set__


def one_part_content(
    role: ContentRole,
    text: str | None,
    event_ids: tuple[str, ...],
    tokens: int,
    call: FunctionCall | None = None,
    response: FunctionResponse | None = None,
) -> Content:
    """``Content(role, (Part(text, call, response),), event_ids, tokens)``, equal in every
    field, built in one call instead of three (a cold compile makes one per event)."""
    part = _new(Part)
    _set_text(part, text)
    _set_call(part, call)
    _set_response(part, response)
    content = _new(Content)
    _set_role(content, role)
    _set_parts(content, (part,))
    _set_ids(content, event_ids)
    _set_tokens(content, tokens)
    return content


@dataclass(frozen=True)
class StepError:
    """A step that failed on an outside source and was skipped (the compile went on).

    ``error`` is the error's class name; ``message`` is safe to show a client (a
    non-public error's message stays in the server log).
    """

    step: str
    error: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "error": self.error, "message": self.message}


@dataclass(frozen=True)
class TraceStep:
    """What one processor did: tokens it added (negative if it removed), time, and
    the error it degraded on, if any."""

    name: str
    tokens_added: int
    micros: int
    detail: dict[str, Any] = field(default_factory=dict)
    error: StepError | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tokens_added": self.tokens_added,
            "micros": self.micros,
            "detail": _json_ready(self.detail),
            "error": None if self.error is None else self.error.to_dict(),
        }


@dataclass(frozen=True)
class PrefixEnd:
    """The first part of a request made for this call only: where a prefix cache stops.

    ``part`` is ``"system_block"`` (``index`` into the system instruction's blocks, the
    static instruction first), ``"content"`` or ``"new_message"`` (``index`` into the
    contents); ``step`` is the processor that added it."""

    step: str
    part: Literal["system_block", "content", "new_message"]
    index: int

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "part": self.part, "index": self.index}


@dataclass(frozen=True)
class CacheablePrefix:
    """What a prefix cache can reuse on the next call: the tool declarations, the first
    ``system_blocks`` blocks of the system instruction and the first ``contents``
    contents, ``tokens`` in all, up to ``ends_before`` (``None``: no part of the request
    is made for this call only)."""

    tokens: int
    system_blocks: int
    contents: int
    ends_before: PrefixEnd | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "system_blocks": self.system_blocks,
            "contents": self.contents,
            "ends_before": None if self.ends_before is None else self.ends_before.to_dict(),
        }


@dataclass(frozen=True)
class CompiledRequest:
    system_instruction: str
    contents: list[Content]
    tools: list[dict[str, Any]]
    static_prefix_tokens: int
    total_tokens: int
    prefix_hash: str
    trace: list[TraceStep]
    #: Tokens before the first part made for this call only (recalled memories,
    #: inlined artifacts, the new message): what a prefix cache can reuse next turn.
    cacheable_prefix_tokens: int = 0
    #: sha256 of the whole system instruction: stable across turns unless state,
    #: artifacts or (with ``memory_placement="system"``) recalled memories change it.
    system_hash: str = ""

    @property
    def degraded(self) -> list[StepError]:
        """The steps skipped because an outside source failed (empty: a full compile)."""
        return [t.error for t in self.trace if t.error is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "system_instruction": self.system_instruction,
            "contents": [c.to_dict() for c in self.contents],
            "tools": _json_ready(self.tools),
            "static_prefix_tokens": self.static_prefix_tokens,
            "total_tokens": self.total_tokens,
            "prefix_hash": self.prefix_hash,
            "cacheable_prefix_tokens": self.cacheable_prefix_tokens,
            "system_hash": self.system_hash,
            "trace": [t.to_dict() for t in self.trace],
            "degraded": [e.to_dict() for e in self.degraded],
        }


def _json_ready(value: Any) -> Any:
    """Round-trip through json so tuples, sets and odd scalars are API-safe."""
    return json.loads(json.dumps(value, default=_fallback))


def _fallback(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)
