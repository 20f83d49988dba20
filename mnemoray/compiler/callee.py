"""Agents as tools: what a callee agent is given instead of the caller's history.

The caller treats a specialised agent as a function: it calls it with a focused
prompt and the artifacts the task needs, and the callee sees those and nothing
else: no session history, no recalled memories, no session state (only the
``temp_state`` passed with the call), no other artifacts. The session named in
the compile only scopes which artifacts may be given (the caller's own, or its
user's ``user:`` ones).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mnemoray.errors import InvalidInput

MAX_GIVEN_ARTIFACTS = 64


@dataclass(frozen=True)
class Callee:
    """``prompt``: the callee's only user turn. ``artifacts``: names or
    ``artifact://`` handles in the caller's scope, inlined for the callee."""

    prompt: str
    artifacts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("must be a non-empty string", field="prompt")
        if isinstance(self.artifacts, str) or not isinstance(self.artifacts, Sequence):
            raise InvalidInput("must be a list of artifact names or handles", field="artifacts")
        if len(self.artifacts) > MAX_GIVEN_ARTIFACTS:
            raise InvalidInput(f"at most {MAX_GIVEN_ARTIFACTS}", field="artifacts")
        for i, name in enumerate(self.artifacts):
            if not isinstance(name, str) or not name:
                raise InvalidInput("must be a non-empty string", field=f"artifacts[{i}]")
        object.__setattr__(self, "artifacts", tuple(self.artifacts))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Callee:
        unknown = set(raw) - {"prompt", "artifacts"}
        if unknown:
            raise InvalidInput("unknown field", field=sorted(unknown)[0])
        return cls(raw.get("prompt", ""), tuple(raw.get("artifacts") or ()))
