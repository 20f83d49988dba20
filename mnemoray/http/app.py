"""The HTTP API (FastAPI; OpenAPI at /docs): the routers, the error mapping, the limits.

Status codes come from the error's class (``mnemoray.http.errors``): bad input is
400 (malformed JSON) or 422 (``field`` names the invalid value), 401/403 for
keys (and 403 on an open server for a ``Host`` that is not a loopback name), 404
for unknown sessions / memories / artifacts, 409 for conflicts
(session exists, stale ``expected_version``, duplicate event id, session already
ended), 413 for an oversize body (or a synchronous add with too much to embed), 429
when a key has too many ingestion jobs pending, 503 when a model backend cannot answer. A 500
is a bug or a damaged store: logged in full, answered with a request id only.

The routes (``mnemoray/serve/routes``) talk to a :class:`mnemoray.http.backend.ApiBackend`;
the Ray deployment (``mnemoray.serve.ingress``) is one, a test double is another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from mnemoray.errors import MnemorayError
from mnemoray.http.auth import ApiKeys, check_local_host
from mnemoray.http.backend import ApiBackend, HttpConfig
from mnemoray.http.errors import answer, install_error_handlers, scope_request_id
from mnemoray.http.metrics import ServeMiddleware
from mnemoray.http.routes import ROUTERS
from mnemoray.schemas.common import ErrorResponse
from mnemoray.settings.serve_groups import ServerSettings

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 409, 413, 422, 429, 500, 503)
}


def operation_id(route: APIRoute) -> str:
    """A route without an explicit ``operation_id`` is named by its function: stable
    across path changes, unlike FastAPI's default (name + path + method)."""
    return route.name


#: Answered whatever the Host: a load balancer's or orchestrator's probe names the
#: machine, not localhost, and the answer says nothing but "ok".
HOST_CHECK_EXEMPT = frozenset({"/healthz"})


class LoopbackHostOnly:
    """The open, loopback-only server (no keys, no ``allow_remote_without_keys``) answers
    only requests whose ``Host`` is a loopback name (``auth.check_local_host``): a DNS
    rebinding page reaches 127.0.0.1 under its own name. Every path but
    :data:`HOST_CHECK_EXEMPT` (the page, /docs and /metrics too); the refusal is the API's
    JSON 403."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope.get("path") not in HOST_CHECK_EXEMPT:
            host = next(
                (v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), None
            )
            try:
                check_local_host(host)
            except MnemorayError as exc:
                await answer(exc, scope_request_id(scope))(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_api(backend: ApiBackend, http: HttpConfig | None = None) -> FastAPI:
    """The ASGI app of one replica: ``backend`` answers, ``http`` says who may ask."""
    http = http or HttpConfig()
    docs = http.docs_open
    api = FastAPI(
        title="mnemoray",
        version="0.1.0",
        description="Long-term memory and compiled context for LLM agents. Authenticate "
        "with `Authorization: Bearer <api key>` when the server has keys.",
        responses=ERRORS,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
        generate_unique_id_function=operation_id,
        swagger_ui_parameters={"persistAuthorization": True},
    )
    api.state.backend = backend
    api.state.http = http
    if http.keys.open and not http.allow_remote_without_keys:
        api.add_middleware(LoopbackHostOnly)  # inside the metrics: refusals are counted
    api.add_middleware(ServeMiddleware, metrics=backend.metrics, max_body_bytes=http.max_body_bytes)
    install_error_handlers(api, http.echo_request_id)  # outermost: every answer has an id
    for router in ROUTERS:
        api.include_router(router)
    return api


def http_config(
    server: ServerSettings, keys: ApiKeys, *, echo_request_id: bool = True
) -> HttpConfig:
    """The HTTP edge's settings from the ``server`` group and the resolved ``keys``."""
    return HttpConfig(
        keys=keys,
        max_body_bytes=server.max_body_bytes,
        allow_remote_without_keys=server.allow_remote_without_keys,
        echo_request_id=echo_request_id,
        docs=server.docs,
        offload_bytes=server.offload_bytes,
        max_sync_embed_chars=server.max_sync_embed_chars,
    )
