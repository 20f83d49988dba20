"""Forget by query: a preview of what would go, then a confirm that forgets exactly it.

The preview recalls the user's best matches (no ``on_memory_recalled``: a look
before deleting is no recall) and returns them with a confirm token that carries
those ids, the owner and an expiry, sealed with an HMAC. The confirm forgets the
ids in the token and nothing else: memories written after the preview that
match the query too stay. The seal keeps a token from being altered or used for
another user; what a caller may do is still decided by its key and the owner.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemoray.errors import InvalidInput, StoreCorrupt
from mnemoray.memory.recall.result import RecallResult
from mnemoray.memory.store.hygiene_db import hygiene_path

TOKEN_TTL_S = 900.0


FORGOTTEN_BY_QUERY = "forgotten by query"  # the default reason (never the query itself)
KEY_FILE = "forget-token.key"
KEY_BYTES = 32


def token_key(store_root: Path) -> bytes:
    """The store's random token key (``STORE/hygiene/forget-token.key``), created once:
    every process serving the store reads the same key (replicas confirm each other's
    previews), and nobody without the store's files can forge a token."""
    path = hygiene_path(store_root, KEY_FILE)
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = _create_key(path)
    if len(key) != KEY_BYTES:
        raise StoreCorrupt(
            f"{path}: expected a {KEY_BYTES}-byte key, got {len(key)} bytes; "
            f"delete it (outstanding confirm tokens become invalid)"
        )
    return key


def _create_key(path: Path) -> bytes:
    """Write a new key unless another process won the race (then read its key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # atomic and never replaces: the first key stays
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_bytes()


@dataclass(frozen=True)
class ForgetPreview:
    app_name: str
    user_id: str
    query: str
    results: Sequence[RecallResult] = field(repr=False)
    confirm_token: str
    expires_at: float

    @property
    def memory_ids(self) -> list[str]:
        return [r.memory.memory_id for r in self.results]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "query": self.query,
            "memory_ids": self.memory_ids,
            "memories": [r.to_dict() for r in self.results],
            "confirm_token": self.confirm_token,
            "expires_at": self.expires_at,
        }


def seal(
    key: bytes, app_name: str, user_id: str, query: str, ids: Sequence[str], expires_at: float
) -> str:
    payload = json.dumps(
        {"a": app_name, "u": user_id, "q": query, "ids": list(ids), "exp": expires_at},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    body = base64.urlsafe_b64encode(zlib.compress(payload.encode("utf-8"))).decode().rstrip("=")
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()[:32]
    return f"{body}.{mac}"


def unseal(
    key: bytes, token: str, app_name: str, user_id: str, now: float | None = None
) -> dict[str, Any]:
    """The preview a token was issued for; InvalidInput (field ``confirm``) when it was
    altered, issued for another user, or expired."""
    bad = InvalidInput(
        "not a confirm token of this user's preview (altered, or issued for "
        "another user); preview again with dry_run",
        field="confirm",
    )
    if not isinstance(token, str) or token.count(".") != 1:
        raise bad
    body, mac = token.split(".")
    want = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()[:32]
    if not hmac.compare_digest(mac, want):
        raise bad
    try:
        raw = json.loads(zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
    except (ValueError, zlib.error) as exc:
        raise bad from exc
    # Sealed by a key holder, yet checked: a well-formed body is no proof of a sane one.
    if (
        not isinstance(raw, dict)
        or (raw.get("a"), raw.get("u")) != (app_name, user_id)
        or not isinstance(raw.get("ids"), list)
        or not all(isinstance(i, str) for i in raw["ids"])
        or isinstance(raw.get("exp"), bool)
        or not isinstance(raw.get("exp"), int | float)
    ):
        raise bad
    if float(raw["exp"]) < (time.time() if now is None else now):
        raise InvalidInput("the preview expired; preview again with dry_run", field="confirm")
    return raw


def pick(previewed: Sequence[str], only: Sequence[str] | None) -> list[str]:
    """The previewed ids to forget: all, or the subset ``only`` (each must be previewed)."""
    if only is None:
        return list(previewed)
    allowed = set(previewed)
    for i, memory_id in enumerate(only):
        if memory_id not in allowed:
            raise InvalidInput(f"{memory_id!r} was not in the preview", field=f"memory_ids[{i}]")
    return list(dict.fromkeys(only))


__all__ = [
    "FORGOTTEN_BY_QUERY",
    "TOKEN_TTL_S",
    "ForgetPreview",
    "pick",
    "seal",
    "token_key",
    "unseal",
]
