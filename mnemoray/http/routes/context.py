"""Compile the working context of one model call."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter

from mnemoray.compiler import AgentSpec
from mnemoray.compiler.template import TemplateError
from mnemoray.errors import InvalidInput
from mnemoray.http.routes.deps import Backend, Caller, elapsed_ms
from mnemoray.schemas.compile import CompiledRequestOut, CompileRequest

router = APIRouter(tags=["context"])


# Documented, not re-validated: the answer is built by the compiler itself.
@router.post(
    "/v1/context:compile",
    operation_id="compile_context",
    responses={200: {"model": CompiledRequestOut}},
    summary="Compile the working context of one model call (CompiledRequest)",
)
async def compile_context(body: CompileRequest, caller: Caller, backend: Backend) -> dict[str, Any]:
    start = time.perf_counter()
    caller.check(body.app_name)
    agent = body.agent.model_dump()
    try:  # the agent checks pydantic cannot express (tools), as request fields agent.*
        AgentSpec(**agent)
    except InvalidInput as exc:
        raise exc.within("agent") from exc
    # Only a callee compile passes `callee`: backends that predate it still serve the rest.
    extra: dict[str, Any] = {"callee": body.callee.model_dump()} if body.callee is not None else {}
    if body.memory_agent is not None:
        extra["memory_agent"] = body.memory_agent
    if body.at_event_id is not None:
        extra["at_event_id"] = body.at_event_id
    try:
        out = await backend.compile(
            body.app_name,
            body.user_id,
            body.session_id,
            agent,
            body.new_message,
            body.temp_state,
            **extra,
        )
    except TemplateError as exc:  # the template is the request's agent.instruction
        raise exc.within("agent") from exc
    # A step skipped on a failed memory source still answers 200; /metrics counts it.
    backend.metrics.count_degraded(out.get("degraded") or ())
    backend.metrics.observe_compile(out)
    out["took_ms"] = elapsed_ms(start)
    return out
