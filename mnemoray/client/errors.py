"""The errors an HTTP answer maps to: one class per status family, each also the
in-process class (``except NotFound`` works against a server as it does locally)."""

from __future__ import annotations

from typing import Any

import httpx

from mnemoray.client.retry import parse_retry_after
from mnemoray.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    MnemorayError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
)


class MnemorayAPIError(MnemorayError, RuntimeError):
    """The server answered with an error: ``status``, ``message`` (naming ``field``),
    ``request_id`` (quote it to find the server's log of a 500)."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        body: Any = None,
        request_id: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)  # the server's message already names the field
        self.field = field
        # The answer's status, whatever the class (the class's stays the API's).
        self.status = status  # type: ignore[misc]
        self.body = body
        self.request_id = request_id
        #: seconds the server asked to wait (``Retry-After``) before asking again
        self.retry_after = retry_after

    @property
    def message(self) -> str:
        return self.reason

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.reason}"


class InvalidInputAPIError(MnemorayAPIError, InvalidInput):
    pass


class PayloadTooLargeAPIError(MnemorayAPIError, PayloadTooLarge):
    pass


class NotFoundAPIError(MnemorayAPIError, NotFound):
    pass


class ConflictAPIError(MnemorayAPIError, Conflict):
    pass


class UnauthorizedAPIError(MnemorayAPIError, Unauthorized):
    pass


class ForbiddenAPIError(MnemorayAPIError, Forbidden):
    pass


class UnavailableAPIError(MnemorayAPIError, Unavailable):
    pass


class RateLimitedAPIError(MnemorayAPIError, Unavailable):
    """429: the server (or a proxy before it) asks to slow down (see ``retry_after``)."""


_BY_STATUS: dict[int, type[MnemorayAPIError]] = {
    400: InvalidInputAPIError,
    422: InvalidInputAPIError,
    413: PayloadTooLargeAPIError,
    404: NotFoundAPIError,
    409: ConflictAPIError,
    401: UnauthorizedAPIError,
    403: ForbiddenAPIError,
    429: RateLimitedAPIError,
    503: UnavailableAPIError,
}


def api_error(
    status: int,
    message: str,
    field: str | None = None,
    body: Any = None,
    request_id: str | None = None,
    *,
    retry_after: float | None = None,
) -> MnemorayAPIError:
    """The typed error for an HTTP error answer (a plain MnemorayAPIError for 500s)."""
    return _BY_STATUS.get(status, MnemorayAPIError)(
        status, message, field, body, request_id, retry_after=retry_after
    )


def error_of(resp: httpx.Response) -> MnemorayAPIError:
    """The error an answer of status >= 400 stands for, from the server's error body
    (``{"error": {"message", "field", "request_id"}}``) or, from a proxy, its text."""
    try:
        body = resp.json()
        err = body.get("error", {}) if isinstance(body, dict) else {}
    except ValueError:
        body, err = resp.text, {}
    if not isinstance(err, dict):
        err = {}
    return api_error(
        resp.status_code,
        err.get("message") or resp.text or resp.reason_phrase,
        err.get("field"),
        body,
        err.get("request_id") or resp.headers.get("x-request-id"),
        retry_after=parse_retry_after(resp.headers.get("retry-after")),
    )
