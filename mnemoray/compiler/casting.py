"""How one event looks to one agent (ADK's narrative casting).

The user's messages are user turns; the agent's own messages and tool calls
are model turns and its tool results function responses. Anything another
agent said or did becomes user-role narrative ("For context: [b] said: ..."),
so the agent never mistakes another agent's actions for its own. A tool
result is attributed to whoever made the call, not to the tool.

Events are immutable, so renderings are kept: per session in the history memo
(:mod:`mnemoray.compiler.history_memo`) and per event in :class:`RenderCache`
for the selections made anew on every compile.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from itertools import islice, repeat

# c_make_encoder: CPython's C encoder (None without it); typeshed does not list it.
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from mnemoray.compiler.context import text_content
from mnemoray.compiler.request import Content, FunctionCall, FunctionResponse, one_part_content
from mnemoray.sessions.events import Event
from mnemoray.tokens import count_tokens

SUMMARY_PREFIX = "[Summary of earlier conversation]: "


# Built once: json.dumps with options would construct an encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)
# The C encoder that JSONEncoder.encode builds on every call (as long as a small
# payload takes to encode), built once with the same options. No circular-reference
# check: payloads come from events, which hold JSON only (checked when made).
_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, str, encode_basestring, None, ": ", ", ", True, False, True)
)


def to_json(value: Any) -> str:
    """Deterministic JSON for tool payloads shown as text."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def summary_text(event: Event) -> str:
    summary = event.data.get("summary")
    if event.text or not isinstance(summary, dict):
        return event.text
    return str(summary.get("summary", ""))


def render(event: Event, agent_name: str, owner: str) -> Content:
    """``event`` as ``agent_name`` sees it; ``owner`` made the tool call (if any)."""
    ids = (event.id,)
    kind = event.type
    own = owner == agent_name
    if kind == "message":  # most events: built here, without text_content's frame
        role = event.role
        if role == "user" or (own and role == "model"):
            text = event.text
            return one_part_content(role, text, ids, count_tokens(text))
        return _user_text(f"For context: [{event.author}] said: ", event.text, ids)
    if kind == "compaction":
        return _user_text(SUMMARY_PREFIX, summary_text(event), ids)
    if kind == "tool_call":
        name, args = event.data["name"], event.data.get("args") or {}
        if own:
            call = FunctionCall(name, args, event.data["call_id"])
            tokens = count_tokens(name) + count_tokens(to_json(args))
            return one_part_content("model", None, ids, tokens, call)
        return _user_text(
            f"For context: [{owner}] called tool `{name}` with parameters: ", to_json(args), ids
        )
    if kind == "tool_result":
        name, response = event.data["name"], event.data.get("response")
        if own:
            result = FunctionResponse(name, response, event.data["call_id"])
            tokens = count_tokens(name) + count_tokens(to_json(response))
            return one_part_content("user", None, ids, tokens, None, result)
        return _user_text(
            f"For context: [{owner}] `{name}` tool returned result: ", to_json(response), ids
        )
    if event.role == "user":
        return text_content("user", event.text, ids)
    if own and event.role == "model":
        return text_content("model", event.text, ids)
    return _user_text(f"For context: [{event.author}] said: ", event.text, ids)


def owners(events: Sequence[Event], call_owner: Mapping[str, str]) -> list[str]:
    """Who each event is attributed to: a tool result to whoever made its call
    (``call_owner``; its own author when the call is not in the log), anything
    else to its author."""
    get = call_owner.get
    return [
        get(e.data["call_id"], e.author) if e.type == "tool_result" else e.author for e in events
    ]


def render_each(events: Sequence[Event], agent_name: str, owners: Sequence[str]) -> list[Content]:
    """``render`` for each event with its owner, uncached (C-level loop)."""
    return list(map(render, events, repeat(agent_name), owners))


def _user_text(preamble: str, body: str, ids: tuple[str, ...]) -> Content:
    """User-role text: narrative about another agent, or a summary."""
    # Counted in two pieces (exact: the preamble ends in a space) so the token
    # cache keys on the event's own text instead of a fresh composite string.
    return text_content("user", preamble + body, ids, count_tokens(preamble) + count_tokens(body))


class RenderCache:
    """Renderings keyed by everything a rendering depends on, bounded in size.

    The key holds the event's id, session, type, role, author and text plus
    the point of view; its ``data`` (unhashable) is compared on a hit. Equal
    inputs give an equal rendering, so a hit is correct even for a different
    event object: a session freshly loaded from a store reuses the renderings
    of the copy compiled before. Fields that do not change the rendering
    (timestamp, state delta, ...) are not part of the key.
    """

    def __init__(self, max_entries: int = 50_000, max_entry_tokens: int = 20_000) -> None:
        self.max_entries = max_entries
        # Huge payloads are re-rendered instead: caching them would pin memory
        # and saves little next to the cost of sending them.
        self.max_entry_tokens = max_entry_tokens
        self._entries: dict[tuple, tuple[dict[str, Any], Content]] = {}
        self._lock = threading.Lock()  # guards insert + evict only; lookups are lock-free

    def render(self, event: Event, agent_name: str, owner: str) -> Content:
        key = (
            event.id,
            event.session_id,
            event.type,
            event.role,
            event.author,
            event.text,
            agent_name,
            owner,
        )
        entry = self._entries.get(key)
        if entry is not None and (entry[0] is event.data or entry[0] == event.data):
            return entry[1]
        content = render(event, agent_name, owner)
        if content.tokens > self.max_entry_tokens:
            return content
        with self._lock:
            self._entries[key] = (event.data, content)
            # Oldest-inserted first out: cheap, and a live session re-inserts.
            while len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]
        return content

    def render_all(
        self, events: Sequence[Event], agent_name: str, owners: Sequence[str]
    ) -> list[Content]:
        """``render`` for each event with its owner (see :func:`owners`), in order.
        One loop and one lock for the batch."""
        entries = self._entries
        out: list[Content] = []
        # Keys and entries of the misses in two lists (a pair per miss would be one
        # more object per rendered event for the garbage collector).
        new_keys: list[tuple] = []
        new_entries: list[tuple[dict[str, Any], Content]] = []
        limit = self.max_entry_tokens
        for event, owner in zip(events, owners, strict=True):
            key = (
                event.id,
                event.session_id,
                event.type,
                event.role,
                event.author,
                event.text,
                agent_name,
                owner,
            )
            entry = entries.get(key)
            if entry is not None and (entry[0] is event.data or entry[0] == event.data):
                out.append(entry[1])
                continue
            content = render(event, agent_name, owner)
            out.append(content)
            if content.tokens <= limit:
                new_keys.append(key)
                new_entries.append((event.data, content))
        if new_keys:
            with self._lock:
                entries.update(zip(new_keys, new_entries, strict=True))
                excess = len(entries) - self.max_entries
                if excess > 0:
                    for key in list(islice(entries, excess)):
                        del entries[key]
        return out

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


CACHE = RenderCache()
