"""The state one compile threads through its processors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress, count, islice, repeat, takewhile
from operator import attrgetter, is_
from typing import Any, Literal, Protocol

from mnemoray.compiler.agent import AgentSpec
from mnemoray.compiler.callee import Callee
from mnemoray.compiler.degrade import step_error
from mnemoray.compiler.request import (
    CacheablePrefix,
    CompiledRequest,
    Content,
    ContentRole,
    PrefixEnd,
    StepError,
    TraceStep,
    one_part_content,
)
from mnemoray.compiler.services import Services
from mnemoray.sessions.session import Session
from mnemoray.tokens import count_tokens

# Blocks of the system instruction are joined with a blank line; whitespace
# adds no tokens, so the total is the sum of the blocks' counts.
BLOCK_SEPARATOR = "\n\n"
_tokens = attrgetter("tokens")
_event_ids = attrgetter("event_ids")


class Processor(Protocol):
    """One named, ordered compiler pass. Must not keep per-compile state."""

    name: str

    def process(self, ctx: CompileContext) -> None: ...


@dataclass
class CompileContext:
    """Inputs (read-only by convention) plus the request being built.

    Processors change the request only through the helpers below, which keep
    the token total current so no step ever recounts the whole request.
    ``detail`` is the current step's trace detail; the compiler gives each
    processor a fresh one. ``step`` names the running processor and ``error`` is
    what it degraded on (:meth:`degrade`), reset for each processor. ``callee``:
    the compile is of an agent called as a tool (see ``callee``).
    """

    session: Session
    agent: AgentSpec
    new_message: str | None
    services: Services
    state: dict[str, Any]
    static_instruction: str = ""
    static_tokens: int = 0
    instructions: list[str] = field(default_factory=list)
    contents: list[Content] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    new_message_content: Content | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    step: str = ""
    error: StepError | None = None
    callee: Callee | None = None
    _instruction_tokens: int = 0
    _stable_instruction_tokens: int = 0  # the blocks before the first per-call one
    # The first per-call block: the step that added it and its index in ``instructions``.
    _per_call_block: tuple[str, int] | None = None
    # id -> (content, the step that added it), for contents without event ids, so the
    # trace can name what ends the cacheable prefix (the object is kept: ids are reused).
    _added_by: dict[int, tuple[Content, str]] = field(default_factory=dict)
    _content_tokens: int = 0
    _tool_tokens: int = 0
    # The first ``_lead`` contents all carry event ids and hold ``_lead_tokens``
    # (at least that many do), so the cacheable prefix need not walk the history.
    _lead: int = 0
    _lead_tokens: int = 0

    # -- totals ----------------------------------------------------------------
    @property
    def total_tokens(self) -> int:
        return (
            self.static_tokens + self._instruction_tokens + self._content_tokens + self._tool_tokens
        )

    # -- system instruction -----------------------------------------------------
    def set_static_instruction(self, text: str) -> None:
        """The static prefix (``prefix_hash``). Everything added later comes after it."""
        self.static_instruction = text
        self.static_tokens = count_tokens(text)

    def add_instruction(self, text: str, per_call: bool = False) -> None:
        """Append a dynamic block to the system instruction (empty text: no-op).
        ``per_call``: made for this call only (recalled memories), so the cacheable
        prefix ends before it."""
        if text:
            tokens = count_tokens(text)
            self.instructions.append(text)
            self._instruction_tokens += tokens
            if per_call and self._per_call_block is None:
                self._per_call_block = (self.step, len(self.instructions) - 1)
            if self._per_call_block is None:
                self._stable_instruction_tokens += tokens

    # -- contents ---------------------------------------------------------------
    def add_content(self, content: Content, index: int | None = None) -> None:
        if not content.event_ids:
            self._added_by[id(content)] = (content, self.step)
        if index is None:
            self.contents.append(content)
        else:
            if index < self._lead:
                self._lead = self._lead_tokens = 0
            self.contents.insert(index, content)
        self._content_tokens += content.tokens

    def extend_contents(self, contents: Iterable[Content], tokens: int | None = None) -> None:
        """``tokens``: the contents' total when the caller already knows it."""
        start = len(self.contents)
        self.contents.extend(contents)
        for content in self.contents[start:]:
            if not content.event_ids:
                self._added_by[id(content)] = (content, self.step)
        self._content_tokens += (
            sum(map(_tokens, self.contents[start:])) if tokens is None else tokens
        )

    def extend_history(self, contents: list[Content], tokens: int) -> None:
        """Append contents rendered from session events (each one has event ids)
        holding ``tokens`` in all."""
        if len(self.contents) == self._lead:
            self._lead += len(contents)
            self._lead_tokens += tokens
        # Not through extend_contents: these all have event ids, none is looked at.
        self.contents.extend(contents)
        self._content_tokens += tokens

    def replace_content(self, index: int, content: Content) -> None:
        if not content.event_ids:
            self._added_by[id(content)] = (content, self.step)
        old = self.contents[index]
        self._content_tokens += content.tokens - old.tokens
        if 0 <= index < self._lead:
            if content.event_ids:
                self._lead_tokens += content.tokens - old.tokens
            else:
                self._lead = self._lead_tokens = 0
        elif index < 0:
            self._lead = self._lead_tokens = 0
        self.contents[index] = content

    def new_message_index(self) -> int:
        """Where a per-call content goes to sit just before the new message."""
        contents = self.contents
        # C-level search by identity (Content's == compares every field).
        return next(
            compress(count(), map(is_, contents, repeat(self.new_message_content))), len(contents)
        )

    def remove_contents(self, indices: Iterable[int]) -> list[Content]:
        """Remove the contents at ``indices``; returns them in request order."""
        drop = set(indices)
        self._lead = self._lead_tokens = 0
        removed = [c for i, c in enumerate(self.contents) if i in drop]
        self.contents = [c for i, c in enumerate(self.contents) if i not in drop]
        self._content_tokens -= sum(c.tokens for c in removed)
        return removed

    def add_new_message(self, text: str) -> None:
        """The caller's new user message: always the final content."""
        content = text_content("user", text)
        self.new_message_content = content
        self.add_content(content)

    # -- tools --------------------------------------------------------------------
    def add_tool(self, tool: dict[str, Any]) -> bool:
        """Declare a tool unless one with the same name is already declared."""
        if any(t.get("name") == tool.get("name") for t in self.tools):
            return False
        self.tools.append(tool)
        self._tool_tokens += count_tokens(json.dumps(tool, sort_keys=True))
        return True

    # -- failures ------------------------------------------------------------------
    def degrade(self, exc: BaseException) -> StepError:
        """Record that the current step skipped its outside source because of ``exc``
        (the caller decided it may: :func:`mnemoray.compiler.degrade.degradable`).
        The step's trace entry and the request's ``degraded`` list name it."""
        self.error = step_error(self.step, exc)
        return self.error

    # -- result -------------------------------------------------------------------
    def build(
        self, trace: list[TraceStep], prefix: CacheablePrefix | None = None
    ) -> CompiledRequest:
        """The request; ``prefix``: its :meth:`cacheable_prefix`, when already taken."""
        blocks = (
            [self.static_instruction, *self.instructions]
            if self.static_instruction
            else self.instructions
        )
        system = BLOCK_SEPARATOR.join(blocks)
        return CompiledRequest(
            system_instruction=system,
            contents=list(self.contents),
            tools=list(self.tools),
            static_prefix_tokens=self.static_tokens,
            total_tokens=self.total_tokens,
            prefix_hash=prefix_hash(self.static_instruction),
            trace=trace,
            cacheable_prefix_tokens=(prefix or self.cacheable_prefix()).tokens,
            system_hash=prefix_hash(system),
        )

    def cacheable_prefix(self) -> CacheablePrefix:
        """Tools and system instruction up to the first per-call block, then (if there
        was none) the history up to the first per-call content (one without event
        ids: the new message, recalled memories, inlined artifacts)."""
        # Tool declarations lead the prompt (Anthropic's cache order: tools, system,
        # messages; chat templates render them into the system turn).
        tokens = self._tool_tokens + self.static_tokens + self._stable_instruction_tokens
        static = 1 if self.static_instruction else 0
        if self._per_call_block is not None:
            step, at = self._per_call_block
            end = PrefixEnd(step, "system_block", static + at)
            return CacheablePrefix(tokens, static + at, 0, end)
        # The history's tokens are known; the walk (C-level) starts after it.
        tail = list(takewhile(_event_ids, islice(self.contents, self._lead, None)))
        count = self._lead + len(tail)
        tokens += self._lead_tokens + sum(map(_tokens, tail))
        blocks = static + len(self.instructions)
        if count == len(self.contents):
            return CacheablePrefix(tokens, blocks, count, None)
        first = self.contents[count]
        added = self._added_by.get(id(first))
        # Empty: put there by hand, past the helpers above.
        step = added[1] if added is not None and added[0] is first else ""
        part: Literal["new_message", "content"] = (
            "new_message" if first is self.new_message_content else "content"
        )
        return CacheablePrefix(tokens, blocks, count, PrefixEnd(step, part, count))


def prefix_hash(static_instruction: str) -> str:
    """sha256 of the stable prefix: equal hashes mean a reusable prefix cache."""
    return hashlib.sha256(static_instruction.encode("utf-8")).hexdigest()


def text_content(
    role: ContentRole, text: str, event_ids: tuple[str, ...] = (), tokens: int | None = None
) -> Content:
    """A one-part text content; ``tokens`` when the caller already knows them."""
    return one_part_content(role, text, event_ids, count_tokens(text) if tokens is None else tokens)
