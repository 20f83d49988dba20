"""One HTTP call of the API as data: what to send, whether it is safe to repeat, and
how to read the answer. The sync and async clients both run these; every endpoint's
logic (path, body, result type) lives once, in the ``*_calls`` modules."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from mnemoray.client.errors import error_of

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] | None = None
    #: a second copy cannot apply the change twice (see ``mnemoray.client.retry``)
    retry_safe: bool = False

    def request(
        self, http: httpx.Client | httpx.AsyncClient, auth: Mapping[str, str]
    ) -> httpx.Request:
        return http.build_request(
            self.method,
            self.path,
            params=self.params,
            json=self.json,
            content=self.content,
            headers={**auth, **(self.headers or {})},
        )

    def result(self, resp: httpx.Response) -> T:
        """The typed answer, or the typed error for a status >= 400."""
        if resp.status_code >= 400:
            raise error_of(resp)
        return self.read(resp)


def signature_of(build: Callable[..., Any]) -> inspect.Signature:
    """A client method's signature: the builder's, with ``self`` and the call's result."""
    sig = inspect.signature(build)
    result = sig.return_annotation
    if isinstance(result, str) and result.startswith("Call[") and result.endswith("]"):
        result = result[len("Call[") : -1]
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sig.replace(parameters=[this, *sig.parameters.values()], return_annotation=result)


def model(cls: type[M]) -> Callable[[httpx.Response], M]:
    """Read the answer as the server's own response model."""
    return lambda resp: cls.model_validate_json(resp.content)


def by_status(models: Mapping[int, type[BaseModel]]) -> Callable[[httpx.Response], Any]:
    """Routes that answer different models by status (202 queued, 200/201 done)."""
    return lambda resp: models[resp.status_code].model_validate_json(resp.content)


def flag(value: bool) -> str:
    return "true" if value else "false"


def seg(value: str) -> str:
    """One path segment, escaped (ids may hold '/', '?', '#')."""
    return quote(value, safe="")


def as_dict(value: Any) -> Any:
    """A ``Session``, ``Event``, ``AgentSpec`` or ``Callee`` as the JSON it is sent as."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return dict(value) if isinstance(value, Mapping) else value


def drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
