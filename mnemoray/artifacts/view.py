"""A session's artifacts as they were at one of its events: a read-only view for compiling an
earlier turn again (``at_event_id``, :func:`mnemoray.compiler.replay.replay`).

The artifact store keeps every version but not when a session began to see it; the session's
events do: each save an agent made is recorded in its event's ``artifact_delta`` (name ->
version). The view shows the names the kept events recorded, each at the highest version
they recorded (or the highest older version still stored, where that one was deleted since).
An artifact saved without an event recording it, a ``user:`` artifact saved by another
session included, is not in the view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NoReturn

from mnemoray.artifacts.store import (
    DEFAULT_MIME,
    USER_SCOPE_SESSION,
    Artifact,
    ArtifactInfo,
    ArtifactStore,
    validate_name,
)
from mnemoray.errors import Conflict
from mnemoray.sessions.events import Event


class ReadOnlyArtifacts(Conflict):
    """A write to a past view of a session's artifacts (HTTP 409): the past is not edited."""


def recorded_versions(events: Iterable[Event]) -> dict[str, int]:
    """Name -> the highest version ``events`` recorded in their ``artifact_delta``."""
    out: dict[str, int] = {}
    for event in events:
        for name, version in event.artifact_delta.items():
            out[name] = max(version, out.get(name, version))
    return out


class ArtifactsAt(ArtifactStore):
    """``store`` seen from one session (``app_name``/``user_id``/``session_id``) with only
    the ``versions`` (name -> highest version) it had then. Reads of another session, user
    or app find nothing; every write raises :class:`ReadOnlyArtifacts`."""

    def __init__(
        self,
        store: ArtifactStore,
        app_name: str,
        user_id: str,
        session_id: str,
        versions: Mapping[str, int],
    ) -> None:
        self._store = store
        self._scope = (app_name, user_id, session_id)
        self._versions = dict(versions)

    def _visible(self, app_name: str, user_id: str, session_id: str, name: str) -> list[int]:
        """The stored versions of ``name`` the view shows, oldest first."""
        validate_name(name)
        top = self._versions.get(name)
        if (
            top is None
            or (app_name, user_id) != self._scope[:2]
            or session_id not in (self._scope[2], USER_SCOPE_SESSION)
        ):
            return []
        stored = self._store.list_versions(app_name, user_id, session_id, name)
        return [v for v in stored if v <= top]

    def _version(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None
    ) -> int:
        visible = self._visible(app_name, user_id, session_id, name)
        if version is None and visible:
            return visible[-1]
        if version is not None and version in visible:
            return version
        raise self._not_found(app_name, user_id, session_id, name, version)

    # -- reads ------------------------------------------------------------------------------
    def load(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> Artifact:
        return self._store.load(
            app_name,
            user_id,
            session_id,
            name,
            self._version(app_name, user_id, session_id, name, version),
        )

    def describe(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> ArtifactInfo:
        return self._store.describe(
            app_name,
            user_id,
            session_id,
            name,
            self._version(app_name, user_id, session_id, name, version),
        )

    def list_names(self, app_name: str, user_id: str, session_id: str) -> list[str]:
        return sorted(n for n in self._versions if self._visible(app_name, user_id, session_id, n))

    def list_versions(self, app_name: str, user_id: str, session_id: str, name: str) -> list[int]:
        return self._visible(app_name, user_id, session_id, name)

    # -- writes: refused ----------------------------------------------------------------------
    def save(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        name: str,
        data: bytes | str,
        mime_type: str = DEFAULT_MIME,
        summary: str = "",
    ) -> int:
        self._refuse()

    def delete(self, app_name: str, user_id: str, session_id: str, name: str) -> None:
        self._refuse()

    def delete_version(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int
    ) -> None:
        self._refuse()

    def _refuse(self) -> NoReturn:
        raise ReadOnlyArtifacts(
            f"the artifacts of session {self._scope[2]!r} as they were at an earlier event "
            f"are read-only"
        )


__all__ = ["ArtifactsAt", "ReadOnlyArtifacts", "recorded_versions"]
