"""Google ADK adapter: mnemoray's :class:`~mnemoray.artifacts.store.ArtifactStore` behind
ADK's ``BaseArtifactService``.

    artifacts = MnemorayArtifactService(FileArtifactStore("STORE/artifacts"))
    # or MnemorayArtifactService(uri="mnemoray:///STORE"): the directory ``mnemoray serve`` uses

Scopes match: a ``user:`` name belongs to the user (every session sees it; ADK
may then pass no session), any other name to its session. A text part is stored
as utf-8 text and an inline-data part as its bytes and mime type, so mnemoray's
compiler, CLI and HTTP API read them as they read their own. Any other part (a
``file_data`` reference, ...), or custom metadata besides ``summary``, is stored
whole as JSON (mime type :data:`PART_MIME`) so ADK gets back exactly what it saved.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import (
    ArtifactVersion,
    BaseArtifactService,
    ensure_part,
)
from google.genai import types
from typing_extensions import override

from mnemoray.adk.uri import given_or_from_uri
from mnemoray.artifacts.store import (
    DEFAULT_MIME,
    TEXT_MIME,
    USER_SCOPE_SESSION,
    ArtifactInfo,
    ArtifactStore,
    is_user_scoped,
)
from mnemoray.errors import InvalidInput, NotFound

T = TypeVar("T")
PART_MIME = "application/vnd.mnemoray.adk-part+json"


def _session(filename: str, session_id: str | None) -> str:
    """The store's session segment: ADK passes none for user-scoped artifacts."""
    if session_id is not None:
        return session_id
    if is_user_scoped(filename):
        return USER_SCOPE_SESSION
    raise InvalidInput(
        f"required for session-scoped artifact {filename!r} (only 'user:' "
        "names live without a session)",
        field="session_id",
    )


def encode(part: types.Part, metadata: dict[str, Any]) -> tuple[bytes | str, str, str]:
    """(payload, mime type, summary) the store keeps for one ADK artifact part."""
    summary = metadata.get("summary", "")
    native = set(metadata) <= {"summary"} and isinstance(summary, str)
    if (
        native
        and part.text is not None
        and not part.thought
        and part.model_dump(exclude_none=True).keys() == {"text"}
    ):
        return part.text, TEXT_MIME, summary
    inline = part.inline_data
    if (
        native
        and inline is not None
        and inline.data is not None
        and part.model_dump(exclude_none=True).keys() == {"inline_data"}
        and inline.model_dump(exclude_none=True).keys() <= {"data", "mime_type"}
        and inline.mime_type != TEXT_MIME
    ):
        return inline.data, inline.mime_type or DEFAULT_MIME, summary
    envelope = {
        "part": part.model_dump(mode="json", exclude_none=True),
        "custom_metadata": metadata,
    }
    return (
        json.dumps(envelope, ensure_ascii=False),
        PART_MIME,
        summary if isinstance(summary, str) else "",
    )


def decode(data: bytes, mime_type: str) -> tuple[types.Part, dict[str, Any]]:
    """The ADK part (and custom metadata) of a stored version."""
    if mime_type == PART_MIME:
        envelope = json.loads(data.decode("utf-8"))
        return types.Part.model_validate(envelope["part"]), dict(envelope["custom_metadata"])
    if mime_type == TEXT_MIME:
        return types.Part(text=data.decode("utf-8")), {}
    return types.Part(inline_data=types.Blob(data=data, mime_type=mime_type)), {}


class MnemorayArtifactService(BaseArtifactService):
    """ADK artifact service over a mnemoray artifact store (``store``, or ``uri``: see
    :func:`mnemoray.adk.uri.parse_uri`). ``offload``: store calls in a worker thread."""

    def __init__(
        self,
        store: ArtifactStore | None = None,
        *,
        uri: str | None = None,
        agents_dir: str | None = None,
        offload: bool = True,
    ) -> None:
        store = given_or_from_uri(
            store, uri, agents_dir, "ArtifactStore", lambda target: target.artifact_store()
        )
        if not isinstance(store, ArtifactStore):
            raise TypeError(f"store: expected an ArtifactStore, got {type(store).__name__}")
        self.store = store
        self.offload = offload

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args) if self.offload else fn(*args)

    @override
    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        part = ensure_part(artifact)
        if artifact_util.is_artifact_ref(part):  # a reference may not leave its scope
            file_uri = cast(str, cast(types.FileData, part.file_data).file_uri)
            parsed = artifact_util.parse_artifact_uri(file_uri)
            if parsed is None:
                raise InvalidInput(
                    f"invalid artifact reference URI {file_uri!r}",
                    field="artifact.file_data.file_uri",
                )
            artifact_util.validate_artifact_reference_scope(
                app_name=app_name, user_id=user_id, session_id=session_id, parsed_uri=parsed
            )
        payload, mime, summary = encode(part, dict(custom_metadata or {}))
        return await self._run(
            self.store.save,
            app_name,
            user_id,
            _session(filename, session_id),
            filename,
            payload,
            mime,
            summary,
        )

    @override
    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        depth = artifact_util._MAX_ARTIFACT_REFERENCE_DEPTH
        while True:
            try:
                stored = await self._run(
                    self.store.load,
                    app_name,
                    user_id,
                    _session(filename, session_id),
                    filename,
                    version,
                )
            except NotFound:
                return None
            part, _ = decode(stored.data, stored.mime_type)
            if not artifact_util.is_artifact_ref(part):
                return part
            target = artifact_util.resolve_artifact_reference(
                file_uri=cast(str, cast(types.FileData, part.file_data).file_uri),
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                remaining_depth=depth,
            )
            depth -= 1
            app_name, user_id, session_id = target.app_name, target.user_id, target.session_id
            filename, version = target.filename, target.version

    @override
    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        """The session's names and the user's ``user:`` names (only those without a
        session), sorted."""
        return await self._run(
            self.store.list_names,
            app_name,
            user_id,
            session_id if session_id is not None else USER_SCOPE_SESSION,
        )

    @override
    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        try:
            await self._run(
                self.store.delete, app_name, user_id, _session(filename, session_id), filename
            )
        except NotFound:
            return

    @override
    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        return await self._run(
            self.store.list_versions, app_name, user_id, _session(filename, session_id), filename
        )

    def _version(self, info: ArtifactInfo) -> ArtifactVersion:
        """Blocking: an enveloped part's metadata and mime type are inside its payload."""
        metadata: dict[str, Any] = {"summary": info.summary} if info.summary else {}
        mime: str | None = info.mime_type
        if info.mime_type == PART_MIME:
            stored = self.store.load(
                info.app_name, info.user_id, info.session_id, info.name, info.version
            )
            part, metadata = decode(stored.data, stored.mime_type)
            mime = (
                part.inline_data.mime_type
                if part.inline_data is not None
                else part.file_data.mime_type
                if part.file_data is not None
                else None
            )
        elif info.mime_type == TEXT_MIME:
            mime = "text/plain"
        return ArtifactVersion(
            version=info.version,
            canonical_uri=info.handle,
            custom_metadata=metadata,
            create_time=info.created_at,
            mime_type=mime,
        )

    def _versions(
        self, app_name: str, user_id: str, session: str, filename: str
    ) -> list[ArtifactVersion]:
        return [
            self._version(self.store.describe(app_name, user_id, session, filename, v))
            for v in self.store.list_versions(app_name, user_id, session, filename)
        ]

    @override
    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        return await self._run(
            self._versions, app_name, user_id, _session(filename, session_id), filename
        )

    @override
    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        def one() -> ArtifactVersion | None:
            try:
                info = self.store.describe(
                    app_name, user_id, _session(filename, session_id), filename, version
                )
            except NotFound:
                return None
            return self._version(info)

        return await self._run(one)


__all__ = ["PART_MIME", "MnemorayArtifactService", "decode", "encode"]
