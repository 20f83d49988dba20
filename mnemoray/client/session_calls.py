"""The calls of sessions, ingestion jobs, context compilation and artifacts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx

from mnemoray.client.call import Call, as_dict, by_status, drop_none, flag, model, seg
from mnemoray.schemas.compile import CompiledRequestOut
from mnemoray.schemas.sessions import (
    AppendEventsResponse,
    ArtifactNames,
    ArtifactSaved,
    ArtifactVersions,
    EndSessionAccepted,
    EndSessionResponse,
    JobOut,
    SessionDeleted,
    SessionInfoOut,
    SessionList,
    SessionOut,
)

#: A job in one of these will not change any more.
FINISHED = frozenset({"done", "failed"})


@dataclass(frozen=True)
class ArtifactContent:
    data: bytes
    mime_type: str
    version: int
    handle: str
    summary: str

    def text(self) -> str:
        return self.data.decode("utf-8")


# -- sessions --------------------------------------------------------------------------------
def create_session(
    app_name: str,
    user_id: str,
    session_id: str | None = None,
    state: Mapping[str, Any] | None = None,
    compaction: Mapping[str, Any] | None = None,
) -> Call[SessionOut]:
    """``compaction``: this session's policy over the app's (``interval``, ``overlap``,
    ``token_threshold``, ``keep_last``, ``boundaries``, ...; any subset); the server then
    compacts it by itself after appends. Repeated on a lost answer only with a
    ``session_id`` (a second copy is then a Conflict, never a second session)."""
    body = drop_none(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id or None,
        state=dict(state or {}),
        compaction=dict(compaction) if compaction is not None else None,
    )
    return Call("POST", "/v1/sessions", model(SessionOut), json=body, retry_safe=bool(session_id))


def get_session(app_name: str, user_id: str, session_id: str) -> Call[SessionOut]:
    return Call(
        "GET",
        f"/v1/sessions/{seg(session_id)}",
        model(SessionOut),
        params={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


def delete_session(app_name: str, user_id: str, session_id: str) -> Call[SessionDeleted]:
    """Delete a session: its events, its own artifacts (not the user's ``user:`` ones),
    its queued ingestion jobs and its memories; what went. A NotFound when there is no
    such session of this user (also when repeated after it went)."""
    return Call(
        "DELETE",
        f"/v1/sessions/{seg(session_id)}",
        model(SessionDeleted),
        params={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


def list_sessions(app_name: str, user_id: str) -> Call[list[SessionInfoOut]]:
    return Call(
        "GET",
        "/v1/sessions",
        lambda r: SessionList.model_validate_json(r.content).sessions,
        params={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


def append_events(
    app_name: str,
    user_id: str,
    session_id: str,
    events: Sequence[Any],
    expected_version: int | None = None,
) -> Call[AppendEventsResponse]:
    """Append all ``events`` or none (Conflict on a repeated id or a stale
    ``expected_version``); ``event_ids`` / ``persisted`` follow the request's order (a
    partial event is not stored). Repeated on a lost answer only when every event has
    an ``id`` or ``expected_version`` is given: a second copy is then refused, never
    appended twice."""
    raw = [as_dict(e) for e in events]
    safe = expected_version is not None or (bool(raw) and all(e.get("id") for e in raw))
    body = drop_none(
        app_name=app_name, user_id=user_id, events=raw, expected_version=expected_version
    )
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/events",
        model(AppendEventsResponse),
        json=body,
        retry_safe=safe,
    )


def end_session(
    app_name: str,
    user_id: str,
    session_id: str,
    *,
    wait: bool = False,
) -> Call[EndSessionAccepted | EndSessionResponse]:
    """End the session; its memory ingestion is queued on the server's disk
    (:class:`EndSessionAccepted` with a ``job_id``: follow it with ``wait_for_job``).
    ``wait=True``: the ingestion runs first (:class:`EndSessionResponse`, ``ingestion``).
    Never repeated by the client: each end queues an ingestion."""
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}:end",
        by_status({202: EndSessionAccepted, 200: EndSessionResponse}),
        params={"wait": flag(wait)},
        json={"app_name": app_name, "user_id": user_id},
    )


# -- ingestion jobs -----------------------------------------------------------------------------
def get_job(app_name: str, user_id: str, job_id: str) -> Call[JobOut]:
    """``status``: ``queued``, ``running``, ``done`` or ``failed`` (with ``error``)."""
    return Call(
        "GET",
        f"/v1/jobs/{seg(job_id)}",
        model(JobOut),
        params={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


def retry_job(app_name: str, user_id: str, job_id: str) -> Call[JobOut]:
    """Queue a failed job again with the input it kept (Conflict unless it failed, so
    a second copy cannot queue it twice)."""
    return Call(
        "POST",
        f"/v1/jobs/{seg(job_id)}:retry",
        model(JobOut),
        json={"app_name": app_name, "user_id": user_id},
        retry_safe=True,
    )


# -- context ------------------------------------------------------------------------------------
def compile(
    app_name: str,
    user_id: str,
    session_id: str,
    agent: Any,
    new_message: str | None = None,
    temp_state: Mapping[str, Any] | None = None,
    callee: Any = None,
    memory_agent: str | None = None,
    at_event_id: str | None = None,
) -> Call[CompiledRequestOut]:
    """The compiled request (system_instruction, contents, tools, token counts,
    prefix_hash, trace) for ``agent`` (an ``AgentSpec`` or its fields). ``callee`` (a
    ``Callee`` or ``{"prompt", "artifacts"}``): compile for an agent called as a tool,
    which sees only that prompt and those artifacts of the session. ``memory_agent``:
    recall the memory block as this agent ("": the shared memories only).
    ``at_event_id``: compile the session as it was right after that event (an earlier
    turn; an unknown id is a NotFound)."""
    body = drop_none(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        agent=as_dict(agent),
        new_message=new_message,
        temp_state=dict(temp_state) if temp_state else None,
        callee=as_dict(callee) if callee is not None else None,
        memory_agent=memory_agent,
        at_event_id=at_event_id,
    )
    return Call(
        "POST", "/v1/context:compile", model(CompiledRequestOut), json=body, retry_safe=True
    )


# -- artifacts ----------------------------------------------------------------------------------
def _artifact_path(app_name: str, user_id: str, session_id: str, name: str | None = None) -> str:
    path = f"/v1/artifacts/{seg(app_name)}/{seg(user_id)}/{seg(session_id)}"
    return path if name is None else f"{path}/{seg(name)}"


def put_artifact(
    app_name: str,
    user_id: str,
    session_id: str,
    name: str,
    data: bytes | str,
    mime_type: str | None = None,
    summary: str = "",
) -> Call[ArtifactSaved]:
    """Save a new version (a ``str`` is sent as UTF-8 text). Never repeated by the
    client: every PUT of an artifact is a new version."""
    if isinstance(data, str):
        payload, mime = data.encode("utf-8"), mime_type or "text/plain; charset=utf-8"
    else:
        payload, mime = bytes(data), mime_type or "application/octet-stream"
    return Call(
        "PUT",
        _artifact_path(app_name, user_id, session_id, name),
        model(ArtifactSaved),
        params={"summary": summary} if summary else None,
        content=payload,
        headers={"Content-Type": mime},
    )


def _content(resp: httpx.Response) -> ArtifactContent:
    return ArtifactContent(
        resp.content,
        # The stored type (the server answers most types as application/octet-stream, a
        # download); a server without the header sent the stored type as Content-Type.
        unquote(resp.headers.get("x-artifact-mime-type") or resp.headers.get("content-type", "")),
        int(resp.headers["x-artifact-version"]),
        resp.headers.get("x-artifact-handle", ""),
        unquote(resp.headers.get("x-artifact-summary", "")),
    )


def get_artifact(
    app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
) -> Call[ArtifactContent]:
    """The latest version, or ``version``; its bytes, mime type, handle and summary."""
    return Call(
        "GET",
        _artifact_path(app_name, user_id, session_id, name),
        _content,
        params=None if version is None else {"version": version},
        retry_safe=True,
    )


def artifact_versions(app_name: str, user_id: str, session_id: str, name: str) -> Call[list[int]]:
    return Call(
        "GET",
        _artifact_path(app_name, user_id, session_id, name) + "/versions",
        lambda r: ArtifactVersions.model_validate_json(r.content).versions,
        retry_safe=True,
    )


def artifact_names(app_name: str, user_id: str, session_id: str) -> Call[list[str]]:
    """This session's artifact names plus the user's ``user:`` ones."""
    return Call(
        "GET",
        _artifact_path(app_name, user_id, session_id),
        lambda r: ArtifactNames.model_validate_json(r.content).names,
        retry_safe=True,
    )
