"""The HTTP answer of every error: the status comes from the error's class.

Body, whatever the status::

    {"error": {"status": 404, "message": "...", "field": "memory_id" | null,
               "request_id": "..."}}

- :class:`mnemoray.errors.MnemorayError`: its class's ``status``; ``message`` and
  ``field`` as raised (the message names the field, the field is carried as data).
- A class that is not ``public`` (:class:`~mnemoray.errors.StoreCorrupt`, a model
  backend's failure naming its URL): its status, but a generic message and the
  request id only; any other exception (a bug): 500, the same way. Either is
  logged in full with the request id, so an operator can find it.
- Request validation (pydantic): 400 for a body that is not JSON, else 422 naming
  the first field (all of them under ``errors``).

Every response carries ``X-Request-ID``: the request's own when it came with a
usable one (Ray Serve's proxy always sets one, and echoes it), else a new one.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, MutableMapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mnemoray.errors import MnemorayError, Unauthorized

log = logging.getLogger("ray.serve")

REQUEST_ID_HEADER = "X-Request-ID"
INTERNAL_MESSAGE = "internal error; the server logged it under this request_id"
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")  # safe to echo and to log


def error_body(
    status: int,
    message: str,
    field: str | None,
    request_id: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one error body of the API (also the body-limit middleware's)."""
    body: dict[str, Any] = {
        "status": status,
        "message": message,
        "field": field,
        "request_id": request_id,
    }
    if extra:
        body.update(extra)
    return {"error": body}


def error_response(
    status: int,
    message: str,
    field: str | None,
    request_id: str | None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(status, message, field, request_id, extra), status_code=status, headers=headers
    )


def scope_request_id(scope: MutableMapping[str, Any]) -> str | None:
    """The id :class:`RequestIdMiddleware` gave the request (None outside it)."""
    return scope.get("state", {}).get("request_id")


def request_id_of(request: Request) -> str | None:
    return scope_request_id(request.scope)


def _cause(exc: BaseException) -> BaseException:
    """The library error inside a Ray task error (a call to another replica)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, MnemorayError) else exc


def answer(exc: BaseException, request_id: str | None, where: str = "") -> JSONResponse:
    """The response for ``exc`` (logging what a client must not see)."""
    exc = _cause(exc)
    cls = type(exc)
    if not isinstance(exc, MnemorayError):  # a bug
        log.error("request %s failed%s: %s: %s", request_id, where, cls.__name__, exc, exc_info=exc)
        return error_response(500, INTERNAL_MESSAGE, None, request_id)
    cls = type(exc)  # a MnemorayError class (narrowed)
    if not cls.public:
        log.error("request %s failed%s: %s: %s", request_id, where, cls.__name__, exc, exc_info=exc)
        return error_response(
            cls.status,
            INTERNAL_MESSAGE
            if cls.status == 500
            else f"{HTTPStatus(cls.status).phrase.lower()}; the server logged "
            f"it under this request_id",
            None,
            request_id,
        )
    if cls.status >= 500:  # e.g. a dependency is down: the operator's business too
        log.warning("request %s%s: %s: %s", request_id, where, cls.__name__, exc)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return error_response(cls.status, str(exc), exc.field, request_id, headers=headers)


def _validation_message(err: dict[str, Any]) -> tuple[str, str]:
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "header"):
        loc = loc[1:] or loc[:1]
    field = ".".join(loc) or "body"
    msg = err.get("msg", "invalid")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return field, f"{field}: {msg}"


async def _library_error(request: Request, exc: Exception) -> JSONResponse:
    return answer(exc, request_id_of(request), f" on {request.method} {request.url.path}")


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    rid = request_id_of(request)
    errs = list(exc.errors())
    if not errs:
        return error_response(422, "body: invalid request", "body", rid)
    if errs[0].get("type") == "json_invalid":
        return error_response(400, f"body: invalid JSON ({errs[0].get('msg', '')})", "body", rid)
    field, message = _validation_message(errs[0])
    return error_response(
        422,
        message,
        field,
        rid,
        {"errors": [{"field": f, "message": m} for f, m in map(_validation_message, errs[:20])]},
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(
        exc.status_code,
        str(exc.detail),
        None,
        request_id_of(request),
        headers=getattr(exc, "headers", None),
    )


class RequestIdMiddleware:
    """Outermost (plain ASGI): gives each request an id, echoes it as ``X-Request-ID``
    (unless ``echo`` is off: a proxy in front does) and answers any exception that
    escaped the app (a bug) with a 500 naming it."""

    def __init__(self, app: Any, echo: bool = True) -> None:
        self.app = app
        self.echo = echo

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                text = value.decode("latin-1")
                rid = text if _CLIENT_ID.match(text) else None
                break
        rid = rid or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        header = (REQUEST_ID_HEADER.lower().encode(), rid.encode())
        started = False

        async def send_with_id(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if self.echo:
                    message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if started:  # too late to answer: let the server close the connection
                raise
            where = f" on {scope.get('method', '')} {scope.get('path', '')}"
            await answer(exc, rid, where)(scope, receive, send_with_id)


def install_error_handlers(api: FastAPI, echo_request_id: bool = True) -> None:
    """The handlers above, and the request-id middleware (call after the others)."""
    api.add_exception_handler(MnemorayError, _library_error)
    api.add_exception_handler(RequestValidationError, _invalid_request)
    api.add_exception_handler(StarletteHTTPException, _http_error)
    api.add_middleware(RequestIdMiddleware, echo=echo_request_id)
