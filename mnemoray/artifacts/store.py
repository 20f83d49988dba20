"""Versioned artifacts: large payloads the model sees only as a handle + summary.

The store on disk is :class:`mnemoray.artifacts.files.FileArtifactStore`.

An artifact is addressed by ``(app, user, session, name, version)``. Names
starting with ``user:`` belong to the user, not the session: every session of
that user sees (and versions) the same artifact, and its handle carries ``~``
as the session segment. Versions count 0, 1, 2, ... per artifact.
"""

from __future__ import annotations

import re
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from mnemoray.errors import InvalidInput, NotFound, Unsupported

USER_SCOPE_PREFIX = "user:"
USER_SCOPE_SESSION = "~"  # the session segment of a user-scoped handle
HANDLE_SCHEME = "artifact://"
DEFAULT_MIME = "application/octet-stream"
TEXT_MIME = "text/plain; charset=utf-8"
_MAX_SEGMENT_BYTES = 255  # one filesystem name component, after url-quoting


class ArtifactError(InvalidInput):
    """A name, handle or payload is invalid; ``field`` says which, the message why."""


class ArtifactNotFoundError(NotFound, KeyError):  # KeyError: for ``except KeyError`` callers
    """No such artifact (or version)."""


def is_user_scoped(name: str) -> bool:
    return name.startswith(USER_SCOPE_PREFIX)


def can_hold_artifacts(*values: Any) -> bool:
    """Whether every value passes the segment rule: one that does not was never accepted
    by a store, so it holds no artifacts (an erasure has nothing to remove there)."""
    try:
        for value in values:
            _check_segment("id", value)
    except ArtifactError:
        return False
    return True


def _check_segment(kind: str, value: Any) -> str:
    """Reject values that could escape a directory or break a handle."""
    if not isinstance(value, str) or not value:
        raise ArtifactError(f"must be a non-empty string, got {value!r}", field=kind)
    if "\x00" in value:
        raise ArtifactError(f"must not contain NUL: {value!r}", field=kind)
    if "/" in value or "\\" in value:
        raise ArtifactError(f"must not contain '/' or '\\': {value!r}", field=kind)
    if value in (".", ".."):
        raise ArtifactError(f"{value!r} is not allowed (path traversal)", field=kind)
    if any(ord(ch) < 32 for ch in value):
        raise ArtifactError(f"must not contain control characters: {value!r}", field=kind)
    if len(quote(value, safe="")) > _MAX_SEGMENT_BYTES:
        raise ArtifactError(f"too long ({len(value)} characters): {value[:40]!r}...", field=kind)
    return value


def validate_name(name: Any) -> str:
    _check_segment("name", name)
    if is_user_scoped(name):
        _check_segment("name", name[len(USER_SCOPE_PREFIX) :] or "")
    return name


def _scope(app_name: str, user_id: str, session_id: str, name: str) -> tuple[str, str, str, str]:
    """Validate a full address; user-scoped names ignore the session."""
    _check_segment("app_name", app_name)
    _check_segment("user_id", user_id)
    validate_name(name)
    if is_user_scoped(name):
        _check_segment("session_id", session_id)
        return app_name, user_id, USER_SCOPE_SESSION, name
    if session_id == USER_SCOPE_SESSION:
        raise ArtifactError(
            f"{USER_SCOPE_SESSION!r} is reserved for user-scoped "
            f"names (starting with {USER_SCOPE_PREFIX!r}), got name {name!r}",
            field="session_id",
        )
    return app_name, user_id, _check_segment("session_id", session_id), name


def format_handle(app_name: str, user_id: str, session_id: str, name: str, version: int) -> str:
    """``artifact://app/user/session/name@v`` with every segment url-quoted."""
    app_name, user_id, session_id, name = _scope(app_name, user_id, session_id, name)
    _check_version(version)
    segments = "/".join(quote(s, safe="") for s in (app_name, user_id, session_id, name))
    return f"{HANDLE_SCHEME}{segments}@{version}"


def parse_handle(handle: str) -> tuple[str, str, str, str, int]:
    """Inverse of :func:`format_handle`: ``(app, user, session, name, version)``.

    A user-scoped handle yields ``"~"`` as its session, which every store
    accepts together with a ``user:`` name.
    """
    if not isinstance(handle, str) or not handle.startswith(HANDLE_SCHEME):
        raise ArtifactError(
            f"malformed artifact handle {handle!r}: must start with {HANDLE_SCHEME!r}"
        )
    parts = handle[len(HANDLE_SCHEME) :].split("/")
    if len(parts) != 4:
        raise ArtifactError(
            f"malformed artifact handle {handle!r}: expected "
            f"{HANDLE_SCHEME}app/user/session/name@version"
        )
    name_part, sep, version_part = parts[3].rpartition("@")
    if not sep or not re.fullmatch(r"\d+", version_part):
        raise ArtifactError(
            f"malformed artifact handle {handle!r}: missing '@<version>' after the name"
        )
    app_name, user_id, session_id, name = (unquote(p) for p in (*parts[:3], name_part))
    if is_user_scoped(name) != (session_id == USER_SCOPE_SESSION):
        raise ArtifactError(
            f"malformed artifact handle {handle!r}: session segment "
            f"{USER_SCOPE_SESSION!r} goes with (and only with) a "
            f"{USER_SCOPE_PREFIX!r} name"
        )
    try:
        _scope(app_name, user_id, session_id, name)
    except ArtifactError as exc:
        raise ArtifactError(f"malformed artifact handle {handle!r}: {exc}") from exc
    return app_name, user_id, session_id, name, int(version_part)


def _check_version(version: Any) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ArtifactError(f"must be a non-negative int, got {version!r}", field="version")
    return version


def _as_bytes(data: Any, mime_type: str) -> tuple[bytes, str]:
    """Text is stored as utf-8; it gets a text mime type unless one was given."""
    if isinstance(data, str):
        return data.encode("utf-8"), (TEXT_MIME if mime_type == DEFAULT_MIME else mime_type)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data), mime_type
    raise ArtifactError(f"expected bytes or str, got {type(data).__name__}", field="data")


@dataclass(frozen=True)
class Artifact:
    app_name: str
    user_id: str
    session_id: str  # the session that saved this version
    name: str
    version: int
    data: bytes
    mime_type: str
    summary: str
    created_at: float

    @property
    def handle(self) -> str:
        return format_handle(self.app_name, self.user_id, self.session_id, self.name, self.version)

    @property
    def size(self) -> int:
        return len(self.data)

    def text(self) -> str:
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArtifactError(
                f"artifact {self.handle} ({self.mime_type}, {self.size} bytes) "
                f"is binary, not utf-8 text: {exc.reason} at byte "
                f"{exc.start}"
            ) from exc


@dataclass(frozen=True)
class ArtifactInfo:
    """What a listing shows of one version: everything but the payload."""

    app_name: str
    user_id: str
    session_id: str
    name: str
    version: int
    mime_type: str
    summary: str
    size: int
    created_at: float

    @property
    def handle(self) -> str:
        return format_handle(self.app_name, self.user_id, self.session_id, self.name, self.version)

    @classmethod
    def of(cls, a: Artifact) -> ArtifactInfo:
        return cls(
            a.app_name,
            a.user_id,
            a.session_id,
            a.name,
            a.version,
            a.mime_type,
            a.summary,
            a.size,
            a.created_at,
        )


class ArtifactStore(ABC):
    """Named, versioned payloads per session (or per user for ``user:`` names)."""

    @abstractmethod
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
        """Store a new version and return its number (0 for the first)."""

    @abstractmethod
    def load(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> Artifact:
        """The given version, or the latest when ``version`` is None."""

    @abstractmethod
    def list_names(self, app_name: str, user_id: str, session_id: str) -> list[str]:
        """This session's names plus the user's ``user:`` names, sorted."""

    @abstractmethod
    def list_versions(
        self, app_name: str, user_id: str, session_id: str, name: str
    ) -> list[int]: ...

    @abstractmethod
    def delete(self, app_name: str, user_id: str, session_id: str, name: str) -> None:
        """Remove every version; raises ArtifactNotFoundError if there is none."""

    @abstractmethod
    def delete_version(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int
    ) -> None:
        """Remove one version, atomically (readers see it whole or not at all); the others
        stay. Raises ArtifactNotFoundError if it does not exist. The next save numbers after
        the latest version left, so only a deleted latest version's number is given again."""

    def delete_session_artifacts(self, app_name: str, user_id: str, session_id: str) -> int:
        """Remove every version of the session's own artifacts (the user's ``user:`` ones
        stay: other sessions see them); how many artifacts went. Idempotent."""
        if not can_hold_artifacts(app_name, user_id, session_id):
            return 0
        gone = 0
        for name in self.list_names(app_name, user_id, session_id):
            if is_user_scoped(name):
                continue
            try:
                self.delete(app_name, user_id, session_id, name)
            except ArtifactNotFoundError:  # deleted meanwhile
                continue
            gone += 1
        return gone

    def delete_user(self, app_name: str, user_id: str) -> int:
        """Remove every artifact of the user, of every session (deleted ones too) and
        ``user:``; how many artifacts went. Idempotent: again, it answers 0."""
        raise Unsupported(f"{type(self).__name__} cannot delete a user's artifacts")

    def describe(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> ArtifactInfo:
        """As :meth:`load` without the payload (a store that can, skips reading it:
        compiles list every artifact of a session on every call)."""
        return ArtifactInfo.of(self.load(app_name, user_id, session_id, name, version))

    def load_handle(self, handle: str) -> Artifact:
        return self.load(*parse_handle(handle))

    @staticmethod
    def _not_found(
        app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> ArtifactNotFoundError:
        what = "any version" if version is None else f"version {version}"
        return ArtifactNotFoundError(
            f"artifact not found: {name!r} ({what}) for app="
            f"{app_name!r} user={user_id!r} session={session_id!r}"
        )

    @staticmethod
    def _check_meta(mime_type: Any, summary: Any) -> None:
        if not isinstance(mime_type, str) or not mime_type:
            raise ArtifactError(f"must be a non-empty string, got {mime_type!r}", field="mime_type")
        if not isinstance(summary, str):
            raise ArtifactError(f"must be a string, got {type(summary).__name__}", field="summary")


class InMemoryArtifactStore(ArtifactStore):
    """Thread-safe artifacts in process memory (tests, single-process agents)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # version -> artifact, in version order (a deleted version leaves a gap)
        self._versions: dict[tuple[str, str, str, str], dict[int, Artifact]] = {}

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
        key = _scope(app_name, user_id, session_id, name)
        self._check_meta(mime_type, summary)
        payload, mime_type = _as_bytes(data, mime_type)
        with self._lock:
            versions = self._versions.setdefault(key, {})
            version = max(versions) + 1 if versions else 0
            versions[version] = Artifact(
                app_name,
                user_id,
                session_id,
                name,
                version,
                payload,
                mime_type,
                summary,
                time.time(),
            )
            return version

    def load(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> Artifact:
        key = _scope(app_name, user_id, session_id, name)
        if version is not None:
            _check_version(version)
        with self._lock:
            versions = self._versions.get(key, {})
            if version is None:
                found = versions.get(max(versions)) if versions else None
            else:
                found = versions.get(version)
            if found is None:
                raise self._not_found(app_name, user_id, session_id, name, version)
            return found

    def list_names(self, app_name: str, user_id: str, session_id: str) -> list[str]:
        _check_segment("app_name", app_name)
        _check_segment("user_id", user_id)
        _check_segment("session_id", session_id)
        with self._lock:
            return sorted(
                name
                for (a, u, s, name) in self._versions
                if a == app_name and u == user_id and s in (session_id, USER_SCOPE_SESSION)
            )

    def list_versions(self, app_name: str, user_id: str, session_id: str, name: str) -> list[int]:
        key = _scope(app_name, user_id, session_id, name)
        with self._lock:
            return sorted(self._versions.get(key, {}))

    def delete(self, app_name: str, user_id: str, session_id: str, name: str) -> None:
        key = _scope(app_name, user_id, session_id, name)
        with self._lock:
            if self._versions.pop(key, None) is None:
                raise self._not_found(app_name, user_id, session_id, name)

    def delete_user(self, app_name: str, user_id: str) -> int:
        if not can_hold_artifacts(app_name, user_id):
            return 0
        with self._lock:
            keys = [k for k in self._versions if k[:2] == (app_name, user_id)]
            for key in keys:
                del self._versions[key]
        return len(keys)

    def delete_version(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int
    ) -> None:
        key = _scope(app_name, user_id, session_id, name)
        _check_version(version)
        with self._lock:
            versions = self._versions.get(key, {})
            if versions.pop(version, None) is None:
                raise self._not_found(app_name, user_id, session_id, name, version)
            if not versions:  # the name goes with its last version
                del self._versions[key]
