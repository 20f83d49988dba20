"""What the store knows about one user, derived from their live memories only.

Nothing here is generated: counts are counts of stored records, facts and open
threads are the texts the distillation stored, newest first. A model reading the
profile resource sees the same data recall would return, summarized.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

RECENT = 10  # items per list: enough to orient a model, small enough for its context


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def _when(m: Mapping[str, Any]) -> float:
    """When the remembered events happened (else when the record was made)."""
    t = m.get("event_time_end")
    return float(t if t is not None else m.get("created_at") or 0.0)


def _newest_unique(
    items: Iterable[tuple[float, str, Mapping[str, Any]]], limit: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for when, text, m in sorted(items, key=lambda it: it[0], reverse=True):
        key = " ".join(text.split()).casefold()
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(
            {
                "text": text,
                "date": _iso(when),
                "memory_id": m.get("memory_id"),
                "session_id": m.get("session_id"),
            }
        )
        if len(out) == limit:
            break
    return out


def build_profile(
    app_name: str, user_id: str, memories: Sequence[Mapping[str, Any]], complete: bool = True
) -> dict[str, Any]:
    """The profile of one user from their live memories (the HTTP API's memory dicts).

    ``recent_facts``: stored ``fact`` records and the key facts distilled from
    sessions, newest first; ``open_threads``: what summarized conversations left
    open; ``complete``: False when only the first part of a very large memory set
    was read (the counts then cover that part).
    """
    kinds = Counter(str(m.get("kind")) for m in memories)
    topics = Counter(t for m in memories for t in m.get("topics") or ())
    facts = [(_when(m), m["text"], m) for m in memories if m.get("kind") == "fact"]
    facts += [
        (_when(m), f, m)
        for m in memories
        if m.get("kind") != "fact"
        for f in m.get("key_facts") or ()
    ]
    threads = [(_when(m), t, m) for m in memories for t in m.get("open_threads") or ()]
    times = [_when(m) for m in memories]
    return {
        "app_name": app_name,
        "user_id": user_id,
        "memories": len(memories),
        "complete": complete,
        "by_kind": dict(sorted(kinds.items())),
        "sessions": len({m.get("session_id") for m in memories}),
        "first": _iso(min(times)) if times else None,
        "last": _iso(max(times)) if times else None,
        "top_topics": [t for t, _ in topics.most_common(RECENT)],
        "recent_facts": _newest_unique(facts, RECENT),
        "open_threads": _newest_unique(threads, RECENT),
    }
