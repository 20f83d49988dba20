"""Sessions: create, read, list, append events (optimistic), end, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from mnemoray.artifacts.offload import OffloadPolicy
from mnemoray.artifacts.offload import append_events as offloading_append
from mnemoray.artifacts.store import ArtifactStore
from mnemoray.compaction.policy import check_policy_events
from mnemoray.compaction.policy import create_session as create_with_policy
from mnemoray.http.routes.deps import Backend, Caller, IdQuery
from mnemoray.schemas.sessions import (
    AppendEventsRequest,
    AppendEventsResponse,
    CreateSessionRequest,
    EndSessionAccepted,
    EndSessionRequest,
    EndSessionResponse,
    SessionDeleted,
    SessionList,
    SessionOut,
)
from mnemoray.sessions.events import Event, EventError
from mnemoray.sessions.session import Session, check_session_size
from mnemoray.sessions.store import SessionStore
from mnemoray.sessions.types import StaleSessionError, only_compactions_since

router = APIRouter(tags=["sessions"])


def session_out(session: Session) -> dict[str, Any]:
    return {**session.to_dict(), "version": session.version}


def parse_events(raw_events: list[dict[str, Any]], session_id: str) -> list[Event]:
    events = []
    for i, raw in enumerate(raw_events):
        try:
            events.append(Event.from_dict({**raw, "session_id": session_id}))
        except EventError as exc:
            raise exc.within(f"events[{i}]") from exc
    return events


def append_events(
    sessions: SessionStore,
    app_name: str,
    user_id: str,
    session_id: str,
    events: list[Event],
    expected_version: int | None,
    artifacts: ArtifactStore | None = None,
    offload: OffloadPolicy | None = None,
) -> dict[str, Any]:
    """Append in order, all or nothing (blocking); refuses a stale ``expected_version``.

    A partial (streaming) event is never stored: its ``event_ids`` entry is null and
    its ``persisted`` entry false, so no client keeps an id the session does not hold.
    Tool results over ``offload`` are stored as ``artifacts`` first (mnemoray.artifacts.offload).
    """
    check_policy_events(events)  # a policy the compactor cannot read is refused, not stored
    session = sessions.get_session(app_name, user_id, session_id)
    # Compactions written in the background since the client's version never conflict.
    if (
        expected_version is not None
        and expected_version != session.version
        and not only_compactions_since(session, expected_version)
    ):
        raise StaleSessionError(
            f"session {session_id!r} is at version {session.version}, "
            f"not {expected_version}; reload and retry",
            field="expected_version",
        )
    # The per-session limits of an archive row hold online too (mnemoray.limits),
    # on the events as stored: offloaded payloads no longer count.
    done = offloading_append(
        sessions,
        artifacts,
        session,
        events,
        offload or OffloadPolicy(threshold_bytes=0),
        lambda stored: check_session_size([*session.events, *(e for e in stored if not e.partial)]),
    )
    return {
        "session_id": session_id,
        "version": session.version,
        "event_ids": [None if e.partial else e.id for e in done],
        "persisted": [not e.partial for e in done],
    }


@router.post(
    "/v1/sessions", operation_id="create_session", response_model=SessionOut, status_code=201
)
async def create_session(
    body: CreateSessionRequest, caller: Caller, backend: Backend
) -> dict[str, Any]:
    caller.check(body.app_name)
    # A session's own compaction policy is its first event (mnemoray.compaction.policy).
    policy = None if body.compaction is None else body.compaction.overrides()
    session = await backend.run_io(
        create_with_policy,
        backend.sessions,
        body.app_name,
        body.user_id,
        body.session_id,
        body.state,
        policy,
    )
    return session_out(session)


@router.get("/v1/sessions", operation_id="list_sessions", response_model=SessionList)
async def list_sessions(
    caller: Caller, backend: Backend, app_name: IdQuery, user_id: IdQuery
) -> dict[str, Any]:
    caller.check(app_name)
    infos = await backend.run_io(backend.sessions.list_sessions, app_name, user_id)
    return {"sessions": [vars(i) for i in infos]}


@router.get("/v1/sessions/{session_id}", operation_id="get_session", response_model=SessionOut)
async def get_session(
    session_id: str, caller: Caller, backend: Backend, app_name: IdQuery, user_id: IdQuery
) -> dict[str, Any]:
    caller.check(app_name)
    return session_out(
        await backend.run_io(backend.sessions.get_session, app_name, user_id, session_id)
    )


@router.post(
    "/v1/sessions/{session_id}/events",
    operation_id="append_events",
    response_model=AppendEventsResponse,
    summary="Append events (optimistic: expected_version)",
)
async def append_session_events(
    session_id: str, body: AppendEventsRequest, caller: Caller, backend: Backend, request: Request
) -> dict[str, Any]:
    caller.check(body.app_name)
    events = parse_events(body.events, session_id)
    offload = OffloadPolicy(threshold_bytes=request.app.state.http.offload_bytes)
    return await backend.run_io(
        append_events,
        backend.sessions,
        body.app_name,
        body.user_id,
        session_id,
        events,
        body.expected_version,
        backend.artifacts,
        offload,
    )


@router.post(
    "/v1/sessions/{session_id}:end",
    operation_id="end_session",
    status_code=202,
    response_model=EndSessionAccepted | EndSessionResponse,
    summary="End a session; its memory ingestion is queued on disk (202 with a "
    "job id), or with ?wait=true runs before the answer (200 with its report)",
)
async def end_session(
    session_id: str,
    body: EndSessionRequest,
    caller: Caller,
    backend: Backend,
    response: Response,
    wait: bool = False,
) -> dict[str, Any]:
    caller.check(body.app_name)
    out = await backend.run_io(
        backend.end_session,
        body.app_name,
        body.user_id,
        session_id,
        wait=wait,
        submitter=caller.actor,
    )
    if wait:
        response.status_code = 200
    return out


@router.delete(
    "/v1/sessions/{session_id}",
    operation_id="delete_session",
    response_model=SessionDeleted,
    summary="Delete a session: its events, its own artifacts (not the user's user: "
    "ones), its queued ingestion jobs and the memories distilled from it",
)
async def delete_session(
    session_id: str, caller: Caller, backend: Backend, app_name: IdQuery, user_id: IdQuery
) -> dict[str, Any]:
    caller.check(app_name)
    # Another user's session is not found, as GET answers: nothing leaks about it.
    return await backend.run_io(
        backend.delete_session, app_name, user_id, session_id, actor=caller.actor
    )
