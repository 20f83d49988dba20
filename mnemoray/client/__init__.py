"""Python clients for the mnemoray HTTP API (``mnemoray serve`` / ``mnemoray.serve.app``).

    from mnemoray.client import MnemorayClient

    with MnemorayClient("http://127.0.0.1:8000", api_key="...") as mr:
        mr.add_memories("shop", "ana", ["Ana prefers window seats."])
        for m in mr.recall("shop", "ana", "where does she like to sit?").memories:
            print(m.score, m.text)

:class:`AsyncMnemorayClient` has the same methods as coroutines (``async with``,
``await mr.recall(...)``, ``async for m in mr.iter_memories(...)``). Both depend on
httpx and pydantic only (no Ray, no torch), and answer with the server's own
response models (``mnemoray.schemas``): ``RecallResponse``, ``MemoryPage``,
``SessionOut``, ``JobOut``, ... (``.model_dump()`` gives the JSON as a dict).

Calls that are safe to repeat are asked again on a lost connection, 429, 502, 503
or 504, with exponential backoff and jitter, honouring ``Retry-After``
(:class:`RetryPolicy`; ``retry=NO_RETRY`` turns it off). A non-2xx answer raises a
:class:`MnemorayAPIError` with the server's status, message, field and request id,
of the class the status stands for: ``except NotFound`` (404), ``except
InvalidInput`` (400/413/422), ``Conflict`` (409), ``Unauthorized`` (401),
``Forbidden`` (403) and ``Unavailable`` (429, 503) work as they do in-process.
"""

from __future__ import annotations

from mnemoray.client.aio import AsyncMnemorayClient
from mnemoray.client.call import Call
from mnemoray.client.errors import (
    ConflictAPIError,
    ForbiddenAPIError,
    InvalidInputAPIError,
    MnemorayAPIError,
    NotFoundAPIError,
    PayloadTooLargeAPIError,
    RateLimitedAPIError,
    UnauthorizedAPIError,
    UnavailableAPIError,
    api_error,
)
from mnemoray.client.retry import NO_RETRY, RetryPolicy
from mnemoray.client.session_calls import ArtifactContent
from mnemoray.client.sync import DEFAULT_URL, MnemorayClient

__all__ = [
    "DEFAULT_URL",
    "NO_RETRY",
    "ArtifactContent",
    "AsyncMnemorayClient",
    "Call",
    "ConflictAPIError",
    "ForbiddenAPIError",
    "InvalidInputAPIError",
    "MnemorayAPIError",
    "MnemorayClient",
    "NotFoundAPIError",
    "PayloadTooLargeAPIError",
    "RateLimitedAPIError",
    "RetryPolicy",
    "UnauthorizedAPIError",
    "UnavailableAPIError",
    "api_error",
]
