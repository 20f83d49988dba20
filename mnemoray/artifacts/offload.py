"""Large tool results leave the session log for the artifact store when appended.

A tool result whose payload is over a threshold (10 KB by default) would be a
permanent context tax if it stayed inline: every later compile carries it.
:func:`append_events` stores such a payload as an artifact first
(durable before the event is), then appends the event with a handle and a short
summary in place of the payload; the compiler lists the artifact and its
``load_artifacts`` tool expands it for one step. The HTTP append route and
in-process callers both append through :func:`append_events`, so the rule lives
here only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mnemoray.artifacts.store import ArtifactNotFoundError, ArtifactStore
from mnemoray.errors import InvalidInput
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore

DEFAULT_THRESHOLD_BYTES = 10 * 1024
SUMMARY_CHARS = 200
JSON_MIME = "application/json"
TEXT_MIME = "text/plain; charset=utf-8"
OFFLOADED_KEY = "offloaded"  # marks a response that was replaced by a handle
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class OffloadPolicy:
    """``threshold_bytes``: payloads larger than this (UTF-8 bytes of the text, or of
    the JSON) become artifacts; 0 turns offloading off."""

    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    summary_chars: int = SUMMARY_CHARS

    def __post_init__(self) -> None:
        if (
            isinstance(self.threshold_bytes, bool)
            or not isinstance(self.threshold_bytes, int)
            or self.threshold_bytes < 0
        ):
            raise InvalidInput("must be a non-negative int (0: off)", field="threshold_bytes")
        if self.summary_chars < 20:
            raise InvalidInput("must be at least 20", field="summary_chars")

    @property
    def enabled(self) -> bool:
        return self.threshold_bytes > 0


@dataclass
class Offloaded:
    """The events to store, and the artifact versions saved for them."""

    events: list[Event]
    saved: list[tuple[str, int]] = field(default_factory=list)  # (name, version)


def payload_of(event: Event) -> tuple[bytes, str] | None:
    """The offloadable payload of ``event`` (bytes, mime type), or None."""
    if event.type != "tool_result" or event.partial:
        return None
    response = event.data.get("response")
    if response is None or (isinstance(response, dict) and response.get(OFFLOADED_KEY)):
        return None
    if isinstance(response, str):
        return response.encode("utf-8"), TEXT_MIME
    return _ENCODER.encode(response).encode("utf-8"), JSON_MIME


def artifact_name(event: Event) -> str:
    """Readable for the model (the tool's name, the start of the event id) and unique per
    event id: the readable part replaces unsafe characters and is cut, so a hash of the
    full id keeps two ids apart (else "load by name" could return the other's payload)."""
    tool = _UNSAFE.sub("_", str(event.data.get("name", "tool")))[:64].strip("._") or "tool"
    digest = hashlib.blake2b(event.id.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return f"{tool}-result-{_UNSAFE.sub('_', event.id)[:48]}-{digest}"


def summarize(response: Any, payload: bytes, tool: str, limit: int = SUMMARY_CHARS) -> str:
    """One line: what the ``response`` is, its size, and how its ``payload`` starts."""
    shape = ""
    if isinstance(response, dict):
        keys = [str(k) for k in list(response)[:8]]
        shape = (
            "object with keys " + ", ".join(keys) + (", ..." if len(response) > 8 else "") + "; "
        )
    elif isinstance(response, list):
        shape = f"list of {len(response)} items; "
    head = " ".join(payload[: limit * 8].decode("utf-8", "ignore").split())
    line = f"`{tool}` result, {len(payload)} bytes ({shape}starts: {head}"
    return (line[: limit - 2] + "…)") if len(line) >= limit else line + ")"


def offload_events(
    artifacts: ArtifactStore,
    session: Session,
    events: Sequence[Event],
    policy: OffloadPolicy = OffloadPolicy(),
) -> Offloaded:
    """Save each payload over the threshold as an artifact of ``session`` (durable
    when this returns: the stores write through) and return the events to append
    in place of the originals: handle + summary instead of the payload."""
    out = Offloaded(list(events))
    if not policy.enabled:
        return out
    try:
        for i, event in enumerate(out.events):
            payload = payload_of(event)
            if payload is None or len(payload[0]) <= policy.threshold_bytes:
                continue
            data, mime = payload
            tool = str(event.data["name"])
            name = artifact_name(event)
            summary = summarize(event.data["response"], data, tool, policy.summary_chars)
            version = artifacts.save(
                session.app_name, session.user_id, session.session_id, name, data, mime, summary
            )
            out.saved.append((name, version))
            handle = artifacts.load(
                session.app_name, session.user_id, session.session_id, name, version
            ).handle
            response = {
                OFFLOADED_KEY: True,
                "artifact": name,
                "handle": handle,
                "bytes": len(data),
                "mime_type": mime,
                "summary": summary,
                "note": "The full result is stored as an artifact; call "
                f"load_artifacts with {handle} to read it.",
            }
            out.events[i] = replace(
                event,
                data={**event.data, "response": response},
                artifact_delta={**event.artifact_delta, name: version},
            )
    except BaseException:
        discard(artifacts, session, out.saved)
        raise
    return out


def discard(artifacts: ArtifactStore, session: Session, saved: list[tuple[str, int]]) -> None:
    """Remove the artifact versions saved for events that were then not stored: exactly
    those versions. Another writer (a retry of the same request) may have saved a later
    version of the same name that a stored event points to."""
    for name, version in saved:
        with contextlib.suppress(ArtifactNotFoundError):
            artifacts.delete_version(
                session.app_name, session.user_id, session.session_id, name, version
            )


def append_events(
    sessions: SessionStore,
    artifacts: ArtifactStore | None,
    session: Session,
    events: Sequence[Event],
    policy: OffloadPolicy = OffloadPolicy(),
    check: Callable[[list[Event]], Any] | None = None,
) -> list[Event]:
    """Offload large payloads, then append (all or nothing, see
    :meth:`SessionStore.append_events`). ``check`` sees the events as they will be
    stored (after offloading) and may raise to refuse them. If the append fails, the
    artifacts saved for it are removed again. Without an artifact store nothing is
    offloaded."""
    if artifacts is None:
        offloaded = Offloaded(list(events))
    else:
        offloaded = offload_events(artifacts, session, events, policy)
    try:
        if check is not None:
            check(offloaded.events)
        return sessions.append_events(session, offloaded.events)
    except BaseException:
        if artifacts is not None:
            discard(artifacts, session, offloaded.saved)
        raise
