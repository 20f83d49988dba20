"""A small Python client for the mnemoray HTTP API (``mnemoray serve`` / ``serve.app``).

    from mnemoray.client import MnemorayClient

    with MnemorayClient("http://127.0.0.1:8000", api_key="...") as mr:
        mr.add_memories("shop", "ana", ["Ana prefers window seats."])
        for m in mr.recall("shop", "ana", "where does she like to sit?")["memories"]:
            print(m["score"], m["text"])

It depends on httpx only (no Ray), so agents can use it anywhere. Every method
returns the decoded JSON of the response; a non-2xx answer raises a
:class:`MnemorayAPIError` with the server's status, message, field and request id,
of the class the status stands for: ``except NotFound`` (404),
``except InvalidInput`` (400/413/422), ``Conflict`` (409), ``Unauthorized`` (401),
``Forbidden`` (403) and ``Unavailable`` (503) work as they do in-process.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import httpx

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

DEFAULT_URL = "http://127.0.0.1:8000"


class MnemorayAPIError(MnemorayError, RuntimeError):
    """The server answered with an error: ``status``, ``message`` (naming ``field``),
    ``request_id`` (quote it to find the server's log of a 500)."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 body: Any = None, request_id: str | None = None) -> None:
        super().__init__(message)  # the server's message already names the field
        self.field = field
        self.status = status  # the answer's status, whatever the class
        self.body = body
        self.request_id = request_id

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


_BY_STATUS: dict[int, type[MnemorayAPIError]] = {
    400: InvalidInputAPIError, 422: InvalidInputAPIError, 413: PayloadTooLargeAPIError,
    404: NotFoundAPIError, 409: ConflictAPIError, 401: UnauthorizedAPIError,
    403: ForbiddenAPIError, 503: UnavailableAPIError}


def api_error(status: int, message: str, field: str | None = None, body: Any = None,
              request_id: str | None = None) -> MnemorayAPIError:
    """The typed error for an HTTP error answer (a plain MnemorayAPIError for 500s)."""
    return _BY_STATUS.get(status, MnemorayAPIError)(status, message, field, body, request_id)


@dataclass(frozen=True)
class ArtifactContent:
    data: bytes
    mime_type: str
    version: int
    handle: str
    summary: str

    def text(self) -> str:
        return self.data.decode("utf-8")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _seg(value: str) -> str:
    return quote(value, safe="")


def _as_dict(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


class MnemorayClient:
    """Thin, synchronous client; one keep-alive connection pool per instance."""

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *,
                 timeout: float = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                  timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MnemorayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        resp = self._http.request(method, path, **kwargs)
        if resp.status_code >= 400:
            try:
                body = resp.json()
                err = body.get("error", {}) if isinstance(body, dict) else {}
            except ValueError:
                body, err = resp.text, {}
            raise api_error(resp.status_code, err.get("message") or resp.text,
                            err.get("field"), body,
                            err.get("request_id") or resp.headers.get("x-request-id"))
        return resp

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # -- ops ----------------------------------------------------------------------------
    def healthz(self) -> dict[str, Any]:
        return self._json("GET", "/healthz")

    def metrics(self) -> str:
        return self._request("GET", "/metrics").text

    # -- memory ---------------------------------------------------------------------------
    def recall(self, app_name: str, user_id: str, query: str, top_k: int = 5,
               filters: Mapping[str, Any] | None = None,
               mode: str | None = None) -> dict[str, Any]:
        """``{"memories": [...], "took_ms", "store_version"}``, best first."""
        body: dict[str, Any] = {"app_name": app_name, "user_id": user_id, "query": query,
                                "top_k": top_k}
        if filters:
            body["filters"] = dict(filters)
        if mode:
            body["mode"] = mode
        return self._json("POST", "/v1/recall", json=body)

    def add_memories(self, app_name: str, user_id: str,
                     memories: Sequence[str | Mapping[str, Any]]) -> dict[str, Any]:
        """Raw memories (a string is ``{"text": ...}``); embedded and committed before
        the answer, so the next recall sees them. ``added``: rows really written;
        ``duplicates``: memories already stored, not written again."""
        items = [{"text": m} if isinstance(m, str) else dict(m) for m in memories]
        return self._json("POST", "/v1/memories", json={"app_name": app_name,
                                                         "user_id": user_id,
                                                         "memories": items})

    def add_session(self, session: Any, *, wait: bool = True) -> dict[str, Any]:
        """Distill a whole session (a ``Session`` or its dict) into memories. The same
        content posted again adds nothing (``status`` "unchanged"); an older copy than the
        stored one replaces nothing (``status`` "older_copy"). ``wait=False``: queue it
        on the server's disk and return ``{"job_id", "status"}`` at once (see
        :meth:`wait_for_job`)."""
        raw = _as_dict(session)
        return self._json("POST", "/v1/memories", params={"wait": _flag(wait)}, json={
            "app_name": raw["app_name"], "user_id": raw["user_id"], "session": raw})

    def list_memories(self, app_name: str, user_id: str, cursor: str | None = None,
                      limit: int = 50) -> dict[str, Any]:
        params: dict[str, Any] = {"app_name": app_name, "user_id": user_id, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        return self._json("GET", "/v1/memories", params=params)

    def iter_memories(self, app_name: str, user_id: str,
                      page_size: int = 200) -> Iterator[dict[str, Any]]:
        cursor = None
        while True:
            page = self.list_memories(app_name, user_id, cursor, page_size)
            yield from page["memories"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> int:
        return self._json("DELETE", f"/v1/memories/{_seg(memory_id)}",
                          params={"app_name": app_name, "user_id": user_id})["forgotten"]

    def forget_user(self, app_name: str, user_id: str) -> int:
        return self._json("DELETE", f"/v1/users/{_seg(app_name)}/{_seg(user_id)}/memories"
                          )["forgotten"]

    # -- sessions -------------------------------------------------------------------------
    def create_session(self, app_name: str, user_id: str, session_id: str | None = None,
                       state: Mapping[str, Any] | None = None,
                       compaction: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``compaction``: this session's policy over the app's (``interval``, ``overlap``,
        ``token_threshold``, ``keep_last``, ``boundaries``; any subset); the server then
        compacts it by itself after appends."""
        body: dict[str, Any] = {"app_name": app_name, "user_id": user_id,
                                "state": dict(state or {})}
        if session_id:
            body["session_id"] = session_id
        if compaction is not None:
            body["compaction"] = dict(compaction)
        return self._json("POST", "/v1/sessions", json=body)

    def get_session(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/sessions/{_seg(session_id)}",
                          params={"app_name": app_name, "user_id": user_id})

    def list_sessions(self, app_name: str, user_id: str) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/sessions",
                          params={"app_name": app_name, "user_id": user_id})["sessions"]

    def append_events(self, app_name: str, user_id: str, session_id: str,
                      events: Sequence[Any],
                      expected_version: int | None = None) -> dict[str, Any]:
        """Append all ``events`` or none (409 on a repeated id or a stale
        ``expected_version``). ``event_ids`` / ``persisted`` follow the request's order; a
        partial (streaming) event is not stored: null id, ``persisted`` false."""
        body: dict[str, Any] = {"app_name": app_name, "user_id": user_id,
                                "events": [_as_dict(e) for e in events]}
        if expected_version is not None:
            body["expected_version"] = expected_version
        return self._json("POST", f"/v1/sessions/{_seg(session_id)}/events", json=body)

    def end_session(self, app_name: str, user_id: str, session_id: str, *,
                    wait: bool = False) -> dict[str, Any]:
        """End the session. Its memory ingestion is queued on the server's disk:
        ``{"session_id", "ended_at", "job_id"}`` (follow it with :meth:`wait_for_job`).
        ``wait=True``: the ingestion runs first and the answer reports it under
        ``ingestion``. Ending an ended session queues its ingestion again."""
        return self._json("POST", f"/v1/sessions/{_seg(session_id)}:end",
                          params={"wait": _flag(wait)},
                          json={"app_name": app_name, "user_id": user_id})

    # -- ingestion jobs -----------------------------------------------------------------------
    def get_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        """``{"job_id", "status", "memories_added", "error"}``; status is ``queued``,
        ``running``, ``done`` or ``failed``."""
        return self._json("GET", f"/v1/jobs/{_seg(job_id)}",
                          params={"app_name": app_name, "user_id": user_id})

    def retry_job(self, app_name: str, user_id: str, job_id: str) -> dict[str, Any]:
        """Queue a failed job again with the input it kept (409 unless it failed)."""
        return self._json("POST", f"/v1/jobs/{_seg(job_id)}:retry",
                          json={"app_name": app_name, "user_id": user_id})

    def wait_for_job(self, app_name: str, user_id: str, job_id: str, *,
                     timeout_s: float = 60.0, poll_s: float = 0.1) -> dict[str, Any]:
        """Poll until the job is ``done`` or ``failed``; after ``timeout_s`` the job as
        it is then (check its ``status``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.get_job(app_name, user_id, job_id)
            if job["status"] in ("done", "failed") or time.monotonic() >= deadline:
                return job
            time.sleep(poll_s)

    # -- context ----------------------------------------------------------------------------
    def compile(self, app_name: str, user_id: str, session_id: str, agent: Any,
                new_message: str | None = None,
                temp_state: Mapping[str, Any] | None = None,
                callee: Any = None) -> dict[str, Any]:
        """The CompiledRequest dict (system_instruction, contents, tools, token counts,
        prefix_hash, trace) for ``agent`` (an ``AgentSpec`` or its fields). ``callee``
        (a ``Callee`` or ``{"prompt", "artifacts"}``): compile for an agent called as a
        tool, which sees only that prompt and those artifacts of the session."""
        body: dict[str, Any] = {"app_name": app_name, "user_id": user_id,
                                "session_id": session_id, "agent": _as_dict(agent)}
        if new_message is not None:
            body["new_message"] = new_message
        if temp_state:
            body["temp_state"] = dict(temp_state)
        if callee is not None:
            body["callee"] = _as_dict(callee)
        return self._json("POST", "/v1/context:compile", json=body)

    # -- artifacts ---------------------------------------------------------------------------
    def _artifact_path(self, app_name: str, user_id: str, session_id: str,
                       name: str | None = None) -> str:
        path = f"/v1/artifacts/{_seg(app_name)}/{_seg(user_id)}/{_seg(session_id)}"
        return path if name is None else f"{path}/{_seg(name)}"

    def put_artifact(self, app_name: str, user_id: str, session_id: str, name: str,
                     data: bytes | str, mime_type: str | None = None,
                     summary: str = "") -> dict[str, Any]:
        """Save a new version; returns ``{"name", "version", "handle", "size", "mime_type"}``."""
        if isinstance(data, str):
            payload, mime = data.encode("utf-8"), mime_type or "text/plain; charset=utf-8"
        else:
            payload, mime = bytes(data), mime_type or "application/octet-stream"
        return self._json("PUT", self._artifact_path(app_name, user_id, session_id, name),
                          content=payload, headers={"Content-Type": mime},
                          params={"summary": summary} if summary else None)

    def get_artifact(self, app_name: str, user_id: str, session_id: str, name: str,
                     version: int | None = None) -> ArtifactContent:
        resp = self._request("GET", self._artifact_path(app_name, user_id, session_id, name),
                             params=None if version is None else {"version": version})
        return ArtifactContent(resp.content, resp.headers.get("content-type", ""),
                               int(resp.headers["x-artifact-version"]),
                               resp.headers.get("x-artifact-handle", ""),
                               unquote(resp.headers.get("x-artifact-summary", "")))

    def artifact_versions(self, app_name: str, user_id: str, session_id: str,
                          name: str) -> list[int]:
        return self._json("GET", self._artifact_path(app_name, user_id, session_id, name)
                          + "/versions")["versions"]

    def artifact_names(self, app_name: str, user_id: str, session_id: str) -> list[str]:
        return self._json("GET", self._artifact_path(app_name, user_id, session_id))["names"]
