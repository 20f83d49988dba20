"""Artifacts on a filesystem: the store ``mnemoray serve`` and the CLI use."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from mnemoray.artifacts.store import (
    DEFAULT_MIME,
    USER_SCOPE_SESSION,
    Artifact,
    ArtifactInfo,
    ArtifactStore,
    _as_bytes,
    _check_segment,
    _check_version,
    _scope,
    can_hold_artifacts,
    is_user_scoped,
)
from mnemoray.locations import local_location

#: What an artifact location may be, for the message that refuses any other.
SUPPORTED = "a directory path"


class FileArtifactStore(ArtifactStore):
    """Artifacts on a filesystem, one directory per artifact::

        ROOT/<app>/<user>/sessions/<session>/<name>/0000000000.bin   payload
                                                   /0000000000.json  metadata
        ROOT/<app>/<user>/user/<user:name>/...                       user-scoped

    Segments are url-quoted. A version number is claimed by creating its
    ``.bin`` with O_EXCL, so concurrent writers (threads or processes) never
    collide; the payload and then the metadata replace their files from
    fsynced temporaries. A version exists once its metadata does, so a reader
    never sees a half-written one.
    """

    _VERSION_RE = re.compile(r"(\d{10})\.json")

    def __init__(self, root: str | Path) -> None:
        # A URL (s3://...) would silently become a directory of that name.
        self.root = Path(local_location(root, field="root", supported=SUPPORTED))
        self.root.mkdir(parents=True, exist_ok=True)

    # -- layout --------------------------------------------------------------
    def _user_dir(self, app_name: str, user_id: str) -> Path:
        return self.root / quote(app_name, safe="") / quote(user_id, safe="")

    def _names_dir(self, app_name: str, user_id: str, session_id: str) -> Path:
        if session_id == USER_SCOPE_SESSION:
            return self._user_dir(app_name, user_id) / "user"
        return self._user_dir(app_name, user_id) / "sessions" / quote(session_id, safe="")

    def _dir(self, key: tuple[str, str, str, str]) -> Path:
        app_name, user_id, session_id, name = key
        return self._names_dir(app_name, user_id, session_id) / quote(name, safe="")

    def _versions_in(self, directory: Path) -> list[int]:
        try:
            entries = os.listdir(directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for e in entries if (m := self._VERSION_RE.fullmatch(e)))

    # -- API -----------------------------------------------------------------
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
        directory = self._dir(key)
        directory.mkdir(parents=True, exist_ok=True)
        data_tmp = _write_temp(directory, payload)
        try:
            version = self._claim_version(directory)
            os.replace(data_tmp, directory / f"{version:010d}.bin")
        except BaseException:
            data_tmp.unlink(missing_ok=True)
            raise
        meta = {
            "app_name": app_name,
            "user_id": user_id,
            "session_id": session_id,
            "name": name,
            "version": version,
            "mime_type": mime_type,
            "summary": summary,
            "created_at": time.time(),
            "size": len(payload),
        }
        meta_tmp = _write_temp(directory, json.dumps(meta, ensure_ascii=False).encode("utf-8"))
        os.replace(meta_tmp, directory / f"{version:010d}.json")
        _fsync_dir(directory)
        return version

    def _claim_version(self, directory: Path) -> int:
        """Create ``N.bin`` exclusively for the next free N; O_EXCL decides races."""
        taken = [int(e[:10]) for e in os.listdir(directory) if re.fullmatch(r"\d{10}\.bin", e)]
        version = max(taken) + 1 if taken else 0
        while True:
            try:
                fd = os.open(
                    directory / f"{version:010d}.bin", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644
                )
            except FileExistsError:
                version += 1
                continue
            os.close(fd)
            return version

    def _meta(self, key: tuple[str, str, str, str], version: int | None) -> dict[str, Any]:
        """The metadata of ``version`` (None: the latest) of the artifact at ``key``."""
        directory = self._dir(key)
        if version is None:
            versions = self._versions_in(directory)
            if not versions:
                raise self._not_found(*key)
            version = versions[-1]
        _check_version(version)
        try:
            return json.loads((directory / f"{version:010d}.json").read_text("utf-8"))
        except FileNotFoundError:
            raise self._not_found(*key, version) from None

    def load(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> Artifact:
        key = _scope(app_name, user_id, session_id, name)
        meta = self._meta(key, version)
        try:
            payload = (self._dir(key) / f"{meta['version']:010d}.bin").read_bytes()
        except FileNotFoundError:  # deleted since its metadata was read
            raise self._not_found(*key, meta["version"]) from None
        return Artifact(
            meta["app_name"],
            meta["user_id"],
            meta["session_id"],
            meta["name"],
            meta["version"],
            payload,
            meta["mime_type"],
            meta["summary"],
            meta["created_at"],
        )

    def describe(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int | None = None
    ) -> ArtifactInfo:
        """From the metadata file alone: the payload is not read."""
        meta = self._meta(_scope(app_name, user_id, session_id, name), version)
        return ArtifactInfo(
            meta["app_name"],
            meta["user_id"],
            meta["session_id"],
            meta["name"],
            meta["version"],
            meta["mime_type"],
            meta["summary"],
            meta["size"],
            meta["created_at"],
        )

    def list_names(self, app_name: str, user_id: str, session_id: str) -> list[str]:
        _check_segment("app_name", app_name)
        _check_segment("user_id", user_id)
        _check_segment("session_id", session_id)
        names: list[str] = []
        scopes = {session_id, USER_SCOPE_SESSION}
        for scope in sorted(scopes):
            parent = self._names_dir(app_name, user_id, scope)
            if not parent.is_dir():
                continue
            for entry in os.listdir(parent):
                name = unquote(entry)
                if is_user_scoped(name) == (scope == USER_SCOPE_SESSION) and self._versions_in(
                    parent / entry
                ):
                    names.append(name)
        return sorted(names)

    def list_versions(self, app_name: str, user_id: str, session_id: str, name: str) -> list[int]:
        return self._versions_in(self._dir(_scope(app_name, user_id, session_id, name)))

    def delete(self, app_name: str, user_id: str, session_id: str, name: str) -> None:
        directory = self._dir(_scope(app_name, user_id, session_id, name))
        # Rename out of the tree first so readers see either every version or none.
        trash = self.root / "%trash"  # url-quoting never yields "%t": no app can clash
        trash.mkdir(exist_ok=True)
        doomed = trash / uuid.uuid4().hex
        try:
            os.rename(directory, doomed)
        except FileNotFoundError:
            raise self._not_found(app_name, user_id, session_id, name) from None
        shutil.rmtree(doomed)

    def delete_user(self, app_name: str, user_id: str) -> int:
        if not can_hold_artifacts(app_name, user_id):
            return 0
        user_dir = self._user_dir(app_name, user_id)
        # One rename takes the whole user out of the tree; the trash entry is named by the
        # user, so a run that crashed before removing it is finished by the next one.
        owner = hashlib.sha256(f"{app_name}\0{user_id}".encode()).hexdigest()
        doomed = self.root / "%trash" / f"user-{owner}"
        if doomed.exists():
            shutil.rmtree(doomed)
        count = 0
        for scope in ("sessions", "user"):
            parent = user_dir / scope
            if scope == "sessions":
                dirs = [d for s in _subdirs(parent) for d in _subdirs(s)]
            else:
                dirs = _subdirs(parent)
            count += sum(1 for d in dirs if self._versions_in(d))
        doomed.parent.mkdir(exist_ok=True)
        try:
            os.rename(user_dir, doomed)
        except FileNotFoundError:
            return 0
        shutil.rmtree(doomed)
        return count

    def delete_version(
        self, app_name: str, user_id: str, session_id: str, name: str, version: int
    ) -> None:
        key = _scope(app_name, user_id, session_id, name)
        _check_version(version)
        directory = self._dir(key)
        # The metadata goes first, in one unlink: the version exists exactly while it does.
        try:
            os.unlink(directory / f"{version:010d}.json")
        except FileNotFoundError:
            raise self._not_found(*key, version) from None
        (directory / f"{version:010d}.bin").unlink(missing_ok=True)
        _fsync_dir(directory)


def _subdirs(directory: Path) -> list[Path]:
    try:
        return [e for e in directory.iterdir() if e.is_dir()]
    except FileNotFoundError:
        return []


def _write_temp(directory: Path, payload: bytes) -> Path:
    """Write ``payload`` to a fsynced temporary file in ``directory``."""
    tmp = directory / f".tmp-{uuid.uuid4().hex}"
    with open(tmp, "xb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    return tmp


def _fsync_dir(directory: Path) -> None:
    """Make the renames durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
