"""Dependencies shared by the routes: the backend, the HTTP edge's settings and the
authenticated caller."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from mnemoray.http.auth import Principal, authenticate
from mnemoray.http.backend import ApiBackend, HttpConfig
from mnemoray.schemas.common import MAX_ID_CHARS


async def backend(request: Request) -> ApiBackend:
    return request.app.state.backend


async def http_config(request: Request) -> HttpConfig:
    return request.app.state.http


# Declares the key in OpenAPI (the docs' Authorize button, `security` on each route);
# it never refuses a request itself: mnemoray.http.auth decides, with its own errors.
BEARER = HTTPBearer(
    scheme_name="ApiKey",
    auto_error=False,
    description="`Authorization: Bearer <api key>` (servers with keys)",
)


async def principal(
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)] = None,
) -> Principal:
    """The caller (a dependency of every route but /healthz)."""
    http: HttpConfig = request.app.state.http
    client = request.client.host if request.client else None
    return authenticate(
        http.keys,
        request.headers.get("authorization"),
        client,
        allow_remote_without_keys=http.allow_remote_without_keys,
    )


# Module level: FastAPI resolves (string) annotations in the route module's namespace.
Backend = Annotated[ApiBackend, Depends(backend)]
Http = Annotated[HttpConfig, Depends(http_config)]
Caller = Annotated[Principal, Depends(principal)]
IdQuery = Annotated[str, Query(min_length=1, max_length=MAX_ID_CHARS)]


def elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
