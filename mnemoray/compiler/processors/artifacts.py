"""Artifacts: handles + summaries, content only for the step that asked.

An agent that names load_artifacts in ``memory_tools`` sees what exists (name,
handle, mime type, summary) and the tool; one that does not sees neither (as in
ADK, where the tool brings the listing), though its instruction template may still
read an artifact (``{artifact.name}``). When the session's last step is this agent's
load_artifacts call and its result, the requested contents are inlined as a
user content for this compile only; nothing is written back, so the payload
leaves the working context after the call that needed it.

A callee (agents as tools) sees exactly the artifacts it was given, inlined
before its prompt, and nothing of the caller's other artifacts.
"""

from __future__ import annotations

from collections.abc import Sequence

from mnemoray.artifacts.store import (
    USER_SCOPE_SESSION,
    Artifact,
    ArtifactError,
    ArtifactInfo,
    ArtifactNotFoundError,
    ArtifactStore,
    parse_handle,
)
from mnemoray.compiler.blocks import inline
from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.processors.offers import not_offered, offer_tool, unavailable
from mnemoray.compiler.request import Content, Part
from mnemoray.compiler.selection import NOISE_TYPES
from mnemoray.compiler.tools import LOAD_ARTIFACTS, LOAD_ARTIFACTS_TOOL
from mnemoray.sessions.events import Event
from mnemoray.sessions.session import Session
from mnemoray.tokens import count_tokens

HANDLE_PREFIX = "artifact://"
LISTING_HEADER = (
    "Artifacts available to you (content is not shown; call load_artifacts "
    "with their names to see it for your next step):"
)


class ArtifactsProcessor:
    name = "artifacts"

    def process(self, ctx: CompileContext) -> None:
        store = ctx.services.artifacts
        session = ctx.session
        if ctx.callee is not None:
            given = list(ctx.callee.artifacts)
            if given:
                if store is None:
                    raise ArtifactError("no artifact store is configured", field="callee.artifacts")
                ctx.add_content(given_content(store, session, given), ctx.new_message_index())
            ctx.detail.update(mode="callee", given=given)
            return
        if store is None:
            unavailable(ctx, LOAD_ARTIFACTS, "no artifact store is configured")
            return
        if not ctx.agent.offers(LOAD_ARTIFACTS):
            not_offered(ctx, LOAD_ARTIFACTS)
            return  # no listing either: the agent could not load what it lists
        names = store.list_names(session.app_name, session.user_id, session.session_id)
        if not names:
            not_offered(ctx, LOAD_ARTIFACTS, "the session has no artifacts")
            return
        # Metadata only: the payloads (offloaded tool results among them) stay unread.
        latest = [
            store.describe(session.app_name, session.user_id, session.session_id, n) for n in names
        ]
        ctx.add_instruction(listing(latest))
        offer_tool(ctx, LOAD_ARTIFACTS_TOOL, "the session has artifacts")
        ctx.detail["listed"] = [a.handle for a in latest]

        requested = requested_in_last_step(session.events, ctx.agent.name)
        if requested:
            content = loaded_content(store, session, requested)
            # Just before the new message, i.e. right after the tool result.
            ctx.add_content(content, ctx.new_message_index())
            ctx.detail["inlined"] = requested


def listing(artifacts: Sequence[Artifact | ArtifactInfo]) -> str:
    # Names and summaries are the uploader's: escaped so none can start an entry of
    # its own or open a block (mnemoray.compiler.blocks).
    lines = [LISTING_HEADER]
    for a in artifacts:
        line = f"- {inline(a.name)}: {inline(a.handle)} ({inline(a.mime_type)}, {a.size} bytes)"
        lines.append(f"{line} - {inline(a.summary)}" if a.summary else line)
    return "\n".join(lines)


def requested_in_last_step(events: Sequence[Event], agent_name: str) -> list[str]:
    """Names this agent asked load_artifacts for, if the log ends with that step.

    The last step is the run of tool results at the end of the log (framework
    noise ignored); anything after them means the step is over.
    """
    results: list[Event] = []
    for event in reversed(events):
        if event.partial or event.type in NOISE_TYPES:
            continue
        if event.type != "tool_result":
            break
        results.append(event)
    wanted = {e.data["call_id"]: e for e in results if e.data["name"] == LOAD_ARTIFACTS}
    if not wanted:
        return []
    calls = {
        e.data["call_id"]: e
        for e in events
        if e.type == "tool_call" and e.data["call_id"] in wanted
    }
    names: list[str] = []
    for call_id, result in reversed(list(wanted.items())):
        call = calls.get(call_id)
        if (call.author if call else result.author) != agent_name:
            continue
        source = call.data.get("args") if call else result.data.get("response")
        requested = source.get("artifact_names") if isinstance(source, dict) else None
        for name in requested or []:
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def loaded_content(store: ArtifactStore, session: Session, names: list[str]) -> Content:
    parts = tuple(Part(text=_artifact_text(store, session, n)) for n in names)
    return Content("user", parts, (), sum(count_tokens(p.text or "") for p in parts))


def given_content(store: ArtifactStore, session: Session, names: list[str]) -> Content:
    """The artifacts handed to a callee. Unlike a model's load_artifacts request, a
    missing one is the caller's error, named by its position."""
    parts = []
    for i, name in enumerate(names):
        try:
            artifact = _load(store, session, name)
        except (ArtifactNotFoundError, ArtifactError) as exc:
            raise exc.within(f"callee.artifacts[{i}]") from exc
        parts.append(Part(text=_render(artifact)))
    return Content("user", tuple(parts), (), sum(count_tokens(p.text or "") for p in parts))


def _artifact_text(store: ArtifactStore, session: Session, name: str) -> str:
    try:
        artifact = _load(store, session, name)
    except (ArtifactNotFoundError, ArtifactError) as exc:
        return f"[Artifact {inline(name)} could not be loaded: {inline(exc)}]"
    return _render(artifact)


def _render(artifact: Artifact) -> str:
    try:
        text = artifact.text()
    except ArtifactError:
        return (
            f"[Artifact {inline(artifact.name)} ({inline(artifact.handle)}) is binary "
            f"({inline(artifact.mime_type)}, {artifact.size} bytes); its content cannot be "
            f"shown as text.]"
        )
    # The header is escaped; the content is what was asked for, shown as it is.
    return (
        f"[Artifact {inline(artifact.name)} ({inline(artifact.handle)}, "
        f"{inline(artifact.mime_type)})]:\n{text}"
    )


def _load(store: ArtifactStore, session: Session, name: str) -> Artifact:
    """Load by name (latest) or by handle; a handle must stay in this session's
    own scope, since the model chose it and must not reach other tenants."""
    if not name.startswith(HANDLE_PREFIX):
        return store.load(session.app_name, session.user_id, session.session_id, name)
    app_name, user_id, session_id, artifact_name, version = parse_handle(name)
    if (app_name, user_id) != (session.app_name, session.user_id) or session_id not in (
        session.session_id,
        USER_SCOPE_SESSION,
    ):
        raise ArtifactError("the handle belongs to another session or user")
    return store.load(session.app_name, session.user_id, session.session_id, artifact_name, version)
