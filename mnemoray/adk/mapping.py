"""ADK event JSON -> mnemoray events: the field rules of one mapping.

Accepts both spellings ADK writes: camelCase (``model_dump(by_alias=True)``,
``appName``, ``functionCall``, ``stateDelta``) and snake_case. One ADK event
may hold several parts; it becomes one mnemoray event per kind of thing that
happened: the text parts joined into one message, then one ``tool_call`` per
function call and one ``tool_result`` per function response, in part order.
Ids are ``<eventid>``, ``<eventid>.1``, ... and the event's state/artifact
deltas go on the first of them, so replaying the mapped events yields the
same state as replaying the ADK ones.

Dependency-free on purpose: archives are read where google-adk is not
installed (Ray workers), so this works on plain dicts.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from typing import Any

from mnemoray.sessions.events import Event, EventError, EventType, Role, parse_timestamp
from mnemoray.sessions.session import SessionError

# Part fields that describe another part rather than carry content of their own.
_PART_METADATA = {
    "thought",
    "thought_signature",
    "part_metadata",
    "media_resolution",
    "video_metadata",
}
# Action fields mapped onto Event fields (the rest is kept verbatim in data["actions"]).
_MAPPED_ACTIONS = {"state_delta", "artifact_delta", "compaction"}
_CAMEL_SESSION_KEYS = ("appName", "userId", "lastUpdateTime")


# (type, role, text, data) of one event to produce.
_Spec = tuple[EventType, Role, str, dict[str, Any]]


class AdkImportError(SessionError):
    """ADK session JSON that cannot be mapped; the message names the field."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def looks_like_adk(raw: Any) -> bool:
    """True for ADK Session JSON, False for the mnemoray archive form.

    mnemoray rows name the session ``session_id`` and their events have no
    ``content``/``actions``; ADK sessions use ``id`` and ADK events always
    carry ``actions`` (and usually ``content``).
    """
    if not isinstance(raw, dict):
        return False
    if any(key in raw for key in (*_CAMEL_SESSION_KEYS, "last_update_time")):
        return True
    if "id" in raw and "session_id" not in raw:
        return True
    events = raw.get("events")
    return isinstance(events, list) and any(
        isinstance(e, dict) and ("content" in e or "actions" in e) for e in events
    )


class _Mapper:
    """Maps one ADK session; holds the state that spans events (pending calls)."""

    def __init__(self, camel: bool) -> None:
        self.camel = camel
        self.events: list[Event] = []
        self.seen_ids: set[str] = set()
        # Calls not yet answered, per tool name: pairs a response that has no id.
        self.pending: defaultdict[str, deque[str]] = defaultdict(deque)

    # -- field access ------------------------------------------------------
    def spell(self, name: str) -> str:
        """A field name as this input spells it, for error messages."""
        return _camel(name) if self.camel else name

    @staticmethod
    def get(obj: dict[str, Any], name: str) -> Any:
        value = obj.get(name)
        return obj.get(_camel(name)) if value is None else value

    def obj(self, parent: dict[str, Any], name: str, where: str) -> dict[str, Any]:
        value = self.get(parent, name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise AdkImportError(
                f"expected an object, got {type(value).__name__}",
                field=f"{where}.{self.spell(name)}",
            )
        return value

    # -- events ------------------------------------------------------------
    def map_event(self, i: int, raw: Any) -> None:
        where = f"events[{i}]"
        if not isinstance(raw, dict):
            raise AdkImportError(f"expected an object, got {type(raw).__name__}", field=where)
        author = raw.get("author")
        if not isinstance(author, str) or not author:
            raise AdkImportError("missing or not a non-empty string", field=f"{where}.author")
        event_id = str(raw.get("id") or f"adk-{i}")  # ADK assigns ids on append; keep stable
        if raw.get("timestamp") is None:
            raise AdkImportError("missing", field=f"{where}.timestamp")
        try:
            ts = parse_timestamp(raw["timestamp"], f"{where}.timestamp")
        except EventError as exc:
            raise AdkImportError.nested(exc) from exc
        invocation_id = str(self.get(raw, "invocation_id") or "")
        role: Role = "user" if author == "user" else "model"

        actions = self.obj(raw, "actions", where)
        actions_where = f"{where}.{self.spell('actions')}"
        state_delta = self.obj(actions, "state_delta", actions_where)
        artifact_delta = self.obj(actions, "artifact_delta", actions_where)
        for name, version in artifact_delta.items():
            if not isinstance(version, int) or isinstance(version, bool) or version < 0:
                raise AdkImportError(
                    f"{actions_where}.{self.spell('artifact_delta')}.{name}: "
                    f"version must be a non-negative int, got {version!r}"
                )

        specs: list[_Spec] = []
        compaction = self.obj(actions, "compaction", actions_where)
        if compaction:
            specs.append(
                self.compaction_spec(
                    compaction, f"{actions_where}.{self.spell('compaction')}", role
                )
            )
        content = self.obj(raw, "content", where)
        unmapped = self.map_parts(
            content, f"{where}.{self.spell('content')}", event_id, role, specs
        )
        error_code = self.get(raw, "error_code")
        error_message = self.get(raw, "error_message")
        if error_code is not None or error_message is not None:
            specs.append(
                (
                    "error",
                    role,
                    str(error_message or error_code),
                    {"code": error_code} if error_code is not None else {},
                )
            )
        if not specs:
            # No content: an actions-only event (state update, transfer, end of agent).
            specs.append(("control", role, "", {}))

        extra_actions = {
            _snake(k): v
            for k, v in actions.items()
            if _snake(k) not in _MAPPED_ACTIONS and v not in (None, {}, [], "")
        }
        first_data = dict(specs[0][3])
        if extra_actions:
            first_data["actions"] = extra_actions
        if unmapped:
            first_data["unmapped_parts"] = unmapped
        specs[0] = (*specs[0][:3], first_data)

        for k, (etype, erole, text, data) in enumerate(specs):
            new_id = event_id if k == 0 else f"{event_id}.{k}"
            if new_id in self.seen_ids:
                raise AdkImportError(f"duplicate event id {new_id!r}", field=f"{where}.id")
            self.seen_ids.add(new_id)
            try:
                self.events.append(
                    Event(
                        id=new_id,
                        author=author,
                        role=erole,
                        type=etype,
                        text=text,
                        data=data,
                        state_delta=dict(state_delta) if k == 0 else {},
                        artifact_delta=dict(artifact_delta) if k == 0 else {},
                        partial=bool(raw.get("partial")),
                        invocation_id=invocation_id,
                        timestamp=ts,
                    )
                )
            except EventError as exc:
                raise AdkImportError.nested(exc, where) from exc

    def map_parts(
        self, content: dict[str, Any], where: str, event_id: str, role: Role, specs: list[_Spec]
    ) -> list[str]:
        """Append message/tool specs for ``content``; return kinds of parts not mapped."""
        parts = self.get(content, "parts")
        parts = [] if parts is None else parts
        if not isinstance(parts, list):
            raise AdkImportError(
                f"expected a list, got {type(parts).__name__}", field=f"{where}.parts"
            )
        texts: list[str] = []
        tools: list[_Spec] = []
        unmapped: list[str] = []
        for j, part in enumerate(parts):
            pwhere = f"{where}.parts[{j}]"
            if not isinstance(part, dict):
                raise AdkImportError(f"expected an object, got {type(part).__name__}", field=pwhere)
            call = self.obj(part, "function_call", pwhere)
            response = self.obj(part, "function_response", pwhere)
            text = part.get("text")
            if call:
                tools.append(
                    self.call_spec(
                        call, f"{pwhere}.{self.spell('function_call')}", f"{event_id}.call{j}"
                    )
                )
            elif response:
                tools.append(
                    self.result_spec(
                        response,
                        f"{pwhere}.{self.spell('function_response')}",
                        f"{event_id}.result{j}",
                    )
                )
            elif text is not None:
                if not isinstance(text, str):
                    raise AdkImportError(
                        f"expected a string, got {type(text).__name__}", field=f"{pwhere}.text"
                    )
                # Thoughts are the model's scratchpad, not conversation: not remembered.
                if not part.get("thought"):
                    texts.append(text)
            else:
                unmapped.extend(
                    _snake(k)
                    for k, v in part.items()
                    if v is not None and _snake(k) not in _PART_METADATA
                )
        if texts:
            # ADK streams one message as several text parts; genai joins them with "".
            specs.append(("message", role, "".join(texts), {}))
        specs.extend(tools)
        return unmapped

    def tool_name(self, obj: dict[str, Any], where: str) -> str:
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise AdkImportError("missing or not a non-empty string", field=f"{where}.name")
        return name

    def call_spec(self, call: dict[str, Any], where: str, fallback_id: str) -> _Spec:
        name = self.tool_name(call, where)
        args = call.get("args")
        if args is not None and not isinstance(args, dict):
            raise AdkImportError(
                f"expected an object, got {type(args).__name__}", field=f"{where}.args"
            )
        call_id = str(call.get("id") or fallback_id)
        self.pending[name].append(call_id)
        return ("tool_call", "model", "", {"name": name, "args": args or {}, "call_id": call_id})

    def result_spec(self, response: dict[str, Any], where: str, fallback_id: str) -> _Spec:
        name = self.tool_name(response, where)
        pending = self.pending[name]
        if response.get("id"):
            call_id = str(response["id"])
            if call_id in pending:
                pending.remove(call_id)
        else:
            # No id: answer the oldest open call of this tool, as ADK pairs them in order.
            call_id = pending.popleft() if pending else fallback_id
        data = {"name": name, "response": response.get("response"), "call_id": call_id}
        return ("tool_result", "tool", "", data)

    def compaction_spec(self, compaction: dict[str, Any], where: str, role: Role) -> _Spec:
        bounds: dict[str, float] = {}
        for name, key in (("start_timestamp", "start_ts"), ("end_timestamp", "end_ts")):
            value = self.get(compaction, name)
            if value is None:
                raise AdkImportError("missing", field=f"{where}.{self.spell(name)}")
            try:
                bounds[key] = parse_timestamp(value, f"{where}.{self.spell(name)}")
            except EventError as exc:
                raise AdkImportError.nested(exc) from exc
        summary_content = self.obj(compaction, "compacted_content", where)
        parts = self.get(summary_content, "parts") or []
        summary = "".join(
            p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
        sources = [
            e.id for e in self.events if bounds["start_ts"] <= e.timestamp <= bounds["end_ts"]
        ]
        data = {**bounds, "summary": summary, "source_event_ids": sources}
        return ("compaction", role, summary, data)
