"""mnemoray memories <-> ADK ``MemoryEntry``: what search answers and add_memory takes."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from mnemoray.errors import InvalidInput
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import EventError, iso, parse_timestamp

# Who "said" a memory, as ADK's preload tool prints it ("author: text"). A
# chunk's text already names each speaker line by line.
_AUTHORS = {
    "fact": "user",
    "session_summary": "summary",
    "compaction_summary": "summary",
    "consolidated_summary": "summary",
}
# The session id of a memory added without one: the HTTP API's default for raw memories.
ONLINE_SESSION = "online"
_LISTS = ("topics", "key_facts", "entities", "source_event_ids")
# custom_metadata keys add_memory understands; "score" and "event_time_end" come back
# from search_memory, so a searched entry can be added again as it is.
METADATA_KEYS = frozenset(
    {"kind", "session_id", *_LISTS, "event_time_end", "ttl_s", "expires_at", "score"}
)


def memory_entry(memory: Memory, score: float | None = None) -> MemoryEntry:
    """One mnemoray memory as an ADK ``MemoryEntry``.

    ``timestamp`` is when the remembered conversation happened (ISO-8601,
    UTC); provenance and score go to ``custom_metadata``.
    """
    when = memory.event_time_start if memory.event_time_start is not None else memory.created_at
    metadata: dict[str, Any] = {
        "kind": memory.kind,
        "session_id": memory.session_id,
        "source_event_ids": list(memory.source_event_ids),
    }
    if score is not None:
        metadata["score"] = float(score)
    for name in ("topics", "key_facts", "entities"):
        if getattr(memory, name):
            metadata[name] = list(getattr(memory, name))
    if memory.event_time_end is not None:
        metadata["event_time_end"] = iso(memory.event_time_end)
    return MemoryEntry(
        id=memory.memory_id,
        content=types.Content(role="user", parts=[types.Part(text=memory.text)]),
        author=_AUTHORS.get(memory.kind),
        timestamp=iso(when),
        custom_metadata=metadata,
    )


def _time(value: Any, where: str) -> float:
    try:
        return parse_timestamp(value, where)
    except EventError as exc:
        raise InvalidInput(str(exc), field=where) from exc


def memory_from_entry(
    entry: MemoryEntry,
    app_name: str,
    user_id: str,
    where: str,
    defaults: Mapping[str, object] | None = None,
) -> Memory:
    """An ADK ``MemoryEntry`` as a raw mnemoray memory (kind "fact" unless its
    ``custom_metadata`` says otherwise). ``defaults``: the call's ``custom_metadata``,
    under the entry's own. Unknown metadata keys are refused, not dropped."""
    meta = {**dict(defaults or {}), **dict(entry.custom_metadata or {})}
    unknown = sorted(set(meta) - METADATA_KEYS)
    if unknown:
        raise InvalidInput(
            f"unknown key {unknown[0]!r}; known: {', '.join(sorted(METADATA_KEYS))}",
            field=f"{where}.custom_metadata",
        )
    parts = entry.content.parts or []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    if not text.strip():
        raise InvalidInput("no text part: mnemoray remembers text", field=f"{where}.content")
    lists: dict[str, Any] = {}  # Memory's tuple fields, by name
    for name in _LISTS:
        value = meta.get(name) or []
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise InvalidInput("expected a list of strings", field=f"{where}.{name}")
        lists[name] = tuple(value)
    now = time.time()
    expires = meta.get("expires_at")
    if meta.get("ttl_s") is not None:
        ttl = meta["ttl_s"]
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
            raise InvalidInput(
                f"must be a positive number of seconds, got {ttl!r}", field=f"{where}.ttl_s"
            )
        expires = now + float(ttl)
    return Memory(
        app_name=app_name,
        user_id=user_id,
        session_id=str(meta.get("session_id") or ONLINE_SESSION),
        kind=str(meta.get("kind") or "fact"),  # type: ignore[arg-type]  # Memory checks it
        text=text,
        memory_id=entry.id or "",
        created_at=now,
        **lists,
        event_time_start=None
        if entry.timestamp is None
        else _time(entry.timestamp, f"{where}.timestamp"),
        event_time_end=None
        if meta.get("event_time_end") is None
        else _time(meta["event_time_end"], f"{where}.event_time_end"),
        expires_at=None if expires is None else _time(expires, f"{where}.expires_at"),
    )


def memory_from_recall(item: Mapping[str, Any], app_name: str, user_id: str) -> Memory:
    """A memory from the HTTP recall answer (``RecalledMemory``), as the server stored it."""
    prov = item.get("provenance") or {}
    return Memory(
        app_name=app_name,
        user_id=user_id,
        session_id=prov.get("session_id") or ONLINE_SESSION,
        kind=item["kind"],
        text=item["text"],
        memory_id=item["memory_id"],
        source_event_ids=tuple(prov.get("source_event_ids") or ()),
        topics=tuple(item.get("topics") or ()),
        key_facts=tuple(item.get("key_facts") or ()),
        event_time_start=prov.get("event_time_start"),
        event_time_end=prov.get("event_time_end"),
        created_at=prov.get("created_at") or time.time(),
    )


__all__ = [
    "METADATA_KEYS",
    "ONLINE_SESSION",
    "memory_entry",
    "memory_from_entry",
    "memory_from_recall",
]
