"""Request models of the compile route's newer parts (agents as tools)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from mnemoray import limits
from mnemoray.compiler.callee import MAX_GIVEN_ARTIFACTS

Prompt = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_MESSAGE_CHARS)]
ArtifactRef = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]


class CalleeIn(BaseModel):
    """Compile for an agent called as a tool: it sees ``prompt`` and the ``artifacts``
    (names or artifact:// handles of the session named in the request) only."""

    model_config = ConfigDict(extra="forbid")

    prompt: Prompt
    artifacts: list[ArtifactRef] = Field(default_factory=list, max_length=MAX_GIVEN_ARTIFACTS)
