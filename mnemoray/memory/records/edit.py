"""Correct a memory: replace its text, keep what it said before, record who changed it.

A store segment is immutable, so a correction is a new record (its text embedded
with the store's embedder) that carries the earlier versions, and a tombstone on
the old one with the reason ``edited``. The new record gets a new id; the old id
still finds it (:func:`find_versions`). The new record is written first: a crash
between the two commits leaves both visible, never neither, and the retried edit
finds its record (same identity: :func:`edited`) and finishes the forget. Of two
editors of one version, the one whose forget finds the old record gone takes its
record back and hears 409.

User corrections are kept when their session is ingested again: the re-distilled
session supersedes only records nobody edited (``supersede.superseded_ids``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from mnemoray import limits
from mnemoray.errors import InvalidInput, NotFound
from mnemoray.memory.records.record import Memory, MemoryVersion, content_hash

EDITED = "edited"  # the reason on an edited memory's tombstone
EDIT_LOST = "edit lost to a concurrent change"  # a correction taken back (409)


def check_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("must be a non-empty string", field="text")
    limits.text_bytes(text, "text", InvalidInput)
    return text


def edited(old: Memory, text: str, actor: str, now: float) -> Memory:
    """``old`` with ``text`` instead of its words: new id, no embedding yet, the old text
    appended to ``previous_versions``. Derived lists (facts, entities) described the old
    words and are dropped; topics, provenance and expiry stay."""
    prior = MemoryVersion(
        old.memory_id,
        old.text,
        old.edited_at if old.edited_at is not None else old.created_at,
        old.edited_by or "",
    )
    versions = (*old.previous_versions, prior)
    # The identity is (the replaced id, the new text): editing back to an earlier text
    # is a new record (another replaced id), and the same edit retried, after a failed
    # second commit or by two editors at once, is one record, never two live copies.
    digest = content_hash(
        old.app_name,
        old.user_id,
        old.session_id,
        old.kind,
        text,
        ",".join(old.source_event_ids),
        f"edit-of:{old.memory_id}",
    )
    return replace(
        old,
        text=text,
        key_text=text,
        key_facts=(),
        entities=(),
        embedding=None,
        shard=-1,
        memory_id="",
        content_hash=digest,
        edited_at=now,
        edited_by=actor,
        previous_versions=versions,
    )


def edits_of(memories: Iterable[Memory], memory_id: str) -> list[Memory]:
    """Live records written as a correction of ``memory_id`` (its direct successors)."""
    return [
        m
        for m in memories
        if m.previous_versions and m.previous_versions[-1].memory_id == memory_id
    ]


def find_versions(memories: Iterable[Memory], memory_id: str) -> Memory:
    """The live memory that is ``memory_id`` or replaced it; NotFound otherwise."""
    for m in memories:
        if m.memory_id == memory_id or any(v.memory_id == memory_id for v in m.previous_versions):
            return m
    raise NotFound(f"no memory {memory_id!r} for this user", field="memory_id")


def versions_out(m: Memory) -> dict[str, Any]:
    """Every text of ``m``, oldest first; the last is the current one."""
    current = MemoryVersion(
        m.memory_id,
        m.text,
        m.edited_at if m.edited_at is not None else m.created_at,
        m.edited_by or "",
    )
    return {
        "memory_id": m.memory_id,
        "versions": [
            {**v.to_dict(), "current": v is current} for v in (*m.previous_versions, current)
        ],
    }


__all__ = [
    "EDITED",
    "EDIT_LOST",
    "check_text",
    "edited",
    "edits_of",
    "find_versions",
    "versions_out",
]
