"""The agent a request is compiled for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

IncludeContents = Literal["default", "none"]


@dataclass
class AgentSpec:
    """An agent as the compiler needs it.

    ``static_instruction`` is never templated and is the whole cacheable
    prefix; ``instruction`` is a state template rendered on every compile.
    ``include_contents="none"`` shows only the current turn (ADK's scoped
    hand-off). ``token_budget`` caps the compiled request; ``None`` means no cap.
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

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("name: must be a non-empty string")
        if self.include_contents not in ("default", "none"):
            raise ValueError(f"include_contents: {self.include_contents!r} is not "
                             "'default' or 'none'")
        if self.token_budget is not None and self.token_budget <= 0:
            raise ValueError("token_budget: must be a positive int or None")
        if self.preload_top_k <= 0:
            raise ValueError("preload_top_k: must be positive")
        for i, tool in enumerate(self.tools):
            if not isinstance(tool, dict) or not tool.get("name"):
                raise ValueError(f"tools[{i}]: a tool is a dict with a 'name'")
