"""The compiler: an ordered list of named processors, run and traced."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from mnemoray.compiler.agent import AgentSpec
from mnemoray.compiler.callee import Callee
from mnemoray.compiler.context import CompileContext, Processor
from mnemoray.compiler.processors import default_processors
from mnemoray.compiler.request import CompiledRequest, TraceStep
from mnemoray.compiler.services import Services
from mnemoray.errors import InvalidInput, NotFound
from mnemoray.sessions.session import Session

# The trace's first and last entries, which no processor makes: the agent's own tool
# declarations and the request's cacheable prefix.
AGENT_TOOLS_STEP = "agent_tools"
CACHEABLE_PREFIX_STEP = "cacheable_prefix"


class UnknownProcessorError(NotFound, KeyError):
    def __init__(self, name: str, known: list[str]) -> None:
        listed = ", ".join(known) or "(none)"
        super().__init__(f"no processor named {name!r}; processors are {listed}")
        self.name = name


class Compiler:
    """Compiles a session into the request for one model call.

    Editing methods change this compiler in place and return it, so a
    variant reads ``Compiler.default().remove("identity")``.
    """

    def __init__(self, processors: list[Processor]) -> None:
        self._processors: list[Processor] = []
        for p in processors:
            self._check_new(p)
            self._processors.append(p)

    @classmethod
    def default(cls) -> Compiler:
        return cls(default_processors())

    # -- the pipeline ---------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [p.name for p in self._processors]

    def get(self, name: str) -> Processor:
        return self._processors[self._index(name)]

    def insert_before(self, name: str, processor: Processor) -> Compiler:
        self._check_new(processor)
        self._processors.insert(self._index(name), processor)
        return self

    def insert_after(self, name: str, processor: Processor) -> Compiler:
        self._check_new(processor)
        self._processors.insert(self._index(name) + 1, processor)
        return self

    def remove(self, name: str) -> Compiler:
        del self._processors[self._index(name)]
        return self

    def replace(self, name: str, processor: Processor) -> Compiler:
        index = self._index(name)
        if processor.name != name:
            self._check_new(processor)
        self._processors[index] = processor
        return self

    def _index(self, name: str) -> int:
        for i, p in enumerate(self._processors):
            if p.name == name:
                return i
        raise UnknownProcessorError(name, self.names)

    def _check_new(self, processor: Processor) -> None:
        name = getattr(processor, "name", None)
        has_process = callable(getattr(processor, "process", None))
        if not isinstance(name, str) or not name or not has_process:
            raise TypeError(f"{processor!r} is not a processor (needs a name and process(ctx))")
        if name in self.names:
            raise InvalidInput(f"a processor named {name!r} is already in the pipeline")
        if name in (AGENT_TOOLS_STEP, CACHEABLE_PREFIX_STEP):
            raise InvalidInput(f"{name!r} names a trace entry of the compiler's own")

    # -- compiling ----------------------------------------------------------------
    def compile(
        self,
        session: Session,
        agent: AgentSpec,
        new_message: str | None = None,
        services: Services | None = None,
        temp_state: dict[str, Any] | None = None,
        callee: Callee | None = None,
    ) -> CompiledRequest:
        """Run every processor in order. Pure: ``session`` is never modified. The trace
        has one entry per processor, between ``agent_tools`` (the agent's own tool
        declarations) and ``cacheable_prefix`` (what a prefix cache can reuse: its
        tokens, how many system blocks and contents it spans, and the first part made
        for this call only, which ends it).

        ``callee``: compile for an agent called as a tool (:meth:`compile_callee`)."""
        if callee is not None and new_message is not None:
            raise InvalidInput(
                "a callee's only user turn is its prompt; leave new_message out",
                field="new_message",
            )
        ctx = CompileContext(
            session=session,
            agent=agent,
            new_message=callee.prompt if callee is not None else new_message,
            services=services or Services(),
            # A callee sees only the state it is handed, not the caller's session.
            state=dict(temp_state or {})
            if callee is not None
            else {**session.state, **(temp_state or {})},
            callee=callee,
        )
        # The agent's own tools lead the declarations; the step is traced so
        # the steps' tokens_added always sum to total_tokens.
        start = time.perf_counter_ns()
        for tool in agent.tools:
            ctx.add_tool(tool)
        trace = [
            TraceStep(
                AGENT_TOOLS_STEP,
                ctx.total_tokens,
                (time.perf_counter_ns() - start) // 1000,
                {"tools": [t["name"] for t in ctx.tools]},
            )
        ]
        for processor in self._processors:
            ctx.detail, ctx.step, ctx.error = {}, processor.name, None
            before = ctx.total_tokens
            start = time.perf_counter_ns()
            processor.process(ctx)
            micros = (time.perf_counter_ns() - start) // 1000
            trace.append(
                TraceStep(processor.name, ctx.total_tokens - before, micros, ctx.detail, ctx.error)
            )
        # The last entry says what a prefix cache can reuse and where that stops, so a
        # reader of the trace sees it beside the steps that made it.
        start = time.perf_counter_ns()
        prefix = ctx.cacheable_prefix()
        micros = (time.perf_counter_ns() - start) // 1000
        trace.append(TraceStep(CACHEABLE_PREFIX_STEP, 0, micros, prefix.to_dict()))
        return ctx.build(trace, prefix)

    def compile_callee(
        self,
        session: Session,
        agent: AgentSpec,
        prompt: str,
        artifacts: Sequence[str] = (),
        services: Services | None = None,
        temp_state: dict[str, Any] | None = None,
    ) -> CompiledRequest:
        """Agents as tools: ``agent`` sees ``prompt`` and the given ``artifacts`` (names
        or handles in ``session``'s scope), none of the caller's history or memory."""
        return self.compile(
            session, agent, None, services, temp_state, Callee(prompt, tuple(artifacts))
        )
