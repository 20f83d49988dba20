"""A user's entity graph around one entity (docs/graph.md)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from mnemoray.graph.index import MAX_DEPTH
from mnemoray.http.routes.deps import Backend, Caller, elapsed_ms
from mnemoray.memory.service.graph_reads import DEFAULT_LIMIT, MAX_LIMIT
from mnemoray.schemas.common import MAX_ID_CHARS
from mnemoray.schemas.graph import GraphResponse

router = APIRouter(tags=["graph"])
PathId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)]


@router.get(
    "/v1/graph/{app_name}/{user_id}",
    operation_id="graph",
    response_model=GraphResponse,
    summary="A user's entity graph around one entity",
)
async def graph(
    app_name: PathId,
    user_id: PathId,
    caller: Caller,
    backend: Backend,
    entity: Annotated[
        str,
        Query(
            min_length=1, max_length=MAX_ID_CHARS, description="a name, an alias or an ent-... id"
        ),
    ],
    depth: Annotated[int, Query(ge=1, le=MAX_DEPTH)] = 2,
    type: Annotated[
        list[str] | None,
        Query(  # noqa: A002  (the query name)
            max_length=32, description="only relations of these types"
        ),
    ] = None,
    at: Annotated[
        str | None,
        Query(max_length=64, description="only relations valid then: epoch seconds or ISO-8601"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> JSONResponse:
    start = time.perf_counter()
    caller.check(app_name)
    out = await backend.memory_op(
        "graph", app_name, user_id, entity=entity, depth=depth, types=type, at=at, limit=limit
    )
    out["took_ms"] = elapsed_ms(start)
    return JSONResponse(out)
