"""The agent a request is compiled for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mnemoray.compiler.tools import BUILTIN_TOOLS
from mnemoray.errors import InvalidInput

IncludeContents = Literal["default", "none"]
MemoryPlacement = Literal["system", "before_message"]


@dataclass
class AgentSpec:
    """An agent as the compiler needs it.

    ``static_instruction`` is never templated and opens the system instruction (the
    static prefix, ``prefix_hash``); ``instruction`` is a state template rendered on
    every compile, after the identity and the user profile, which change less often.
    ``include_contents="none"`` shows only the current turn (ADK's scoped
    hand-off). ``token_budget`` caps the compiled request; ``None`` means no cap.
    ``memory_placement``: preloaded memories go into a user content just before the
    new message ("before_message", the default: the system instruction and history
    stay a cacheable prefix) or into the system instruction ("system": it then
    changes with every recall). ``tool_result_window``: tool results of invocations
    older than the last N show as their call and a one-line summary; ``None`` keeps
    them all.
    ``memory_tools``: which of the compiler's own tools (``load_memory``,
    ``load_artifacts``) the agent is offered, opt-in: each one named is offered when
    its service is configured, and by default (``[]``; ``None`` from a JSON payload
    means the same) none is, so the agent sees only its own ``tools``. The artifact
    listing comes with ``load_artifacts`` (an agent without it could not load what it
    lists, as in ADK, where the tool adds the listing); ``memory_preload`` is separate
    (recall before the call, not a tool) and works without ``load_memory``.
    ``user_profile``: show the user's profile (mnemoray.profiles) in the system
    instruction, when the compile has a profile source. ``preload_budget_tokens``: the
    preloaded memories' text fits in that many tokens (the best that fit, none
    repeating another); ``None``: ``preload_top_k`` alone bounds them.
    """

    name: str
    description: str = ""
    static_instruction: str = ""
    instruction: str = ""
    include_contents: IncludeContents = "default"
    token_budget: int | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    memory_preload: bool = False
    preload_top_k: int = 5
    preload_budget_tokens: int | None = None
    memory_placement: MemoryPlacement = "before_message"
    tool_result_window: int | None = None
    memory_tools: list[str] = field(default_factory=list)
    user_profile: bool = False

    def offers(self, tool_name: str) -> bool:
        """Whether this agent opted into the compiler's tool ``tool_name``."""
        return tool_name in self.memory_tools

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidInput("must be a non-empty string", field="name")
        if self.include_contents not in ("default", "none"):
            raise InvalidInput(
                f"{self.include_contents!r} is not 'default' or 'none'", field="include_contents"
            )
        if self.token_budget is not None and self.token_budget <= 0:
            raise InvalidInput("must be a positive int or None", field="token_budget")
        if self.memory_placement not in ("system", "before_message"):
            raise InvalidInput(
                f"{self.memory_placement!r} is not 'system' or 'before_message'",
                field="memory_placement",
            )
        window = self.tool_result_window
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window < 1
        ):
            raise InvalidInput(
                "must be a positive int (invocations) or None", field="tool_result_window"
            )
        if self.preload_top_k <= 0:
            raise InvalidInput("must be positive", field="preload_top_k")
        b = self.preload_budget_tokens
        if b is not None and (not isinstance(b, int) or isinstance(b, bool) or b <= 0):
            raise InvalidInput(
                "must be a positive int (tokens) or None", field="preload_budget_tokens"
            )
        self.memory_tools = _tool_names(self.memory_tools)
        for i, tool in enumerate(self.tools):
            if not isinstance(tool, dict) or not tool.get("name"):
                raise InvalidInput("a tool is a dict with a 'name'", field=f"tools[{i}]")


def _tool_names(value: object) -> list[str]:
    """``memory_tools`` checked; ``None`` (a JSON null, as older payloads send) is none."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise InvalidInput("must be a list of tool names", field="memory_tools")
    for i, name in enumerate(value):
        if name not in BUILTIN_TOOLS:
            raise InvalidInput(
                f"{name!r} is not one of {', '.join(BUILTIN_TOOLS)}", field=f"memory_tools[{i}]"
            )
    return list(value)
