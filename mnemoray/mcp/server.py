"""The MCP server: tools and resources over one :class:`~mnemoray.mcp.backend.Backend`.

The tenant (app, user) is fixed when the server starts and no tool takes one. An
MCP client hands the model every tool argument to choose, and the model's input
is partly what users and documents wrote: a ``user_id`` argument would let a
prompt read or forget another user's memories. Fixed at start, a server process
answers for one user, like an API key scoped to one app on the HTTP API.

Argument schemas are the HTTP API's request models (``mnemoray.schemas``): one set of
limits, whichever edge a call comes through. Errors a caller can fix come back as
MCP tool errors of one line (``Error executing tool recall: top_k: ...``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any
from urllib.parse import quote

from mcp_types import ToolAnnotations
from pydantic import BeforeValidator, Field, StringConstraints

from mnemoray.errors import InvalidInput, NotFound
from mnemoray.limits import MAX_FORGET_PREVIEW
from mnemoray.mcp.backend import Backend
from mnemoray.mcp.errors import MnemorayMCP, resource_errors, tool_errors
from mnemoray.mcp.profile import build_profile
from mnemoray.memory.records.agent_names import check_agent_name
from mnemoray.schemas.common import (
    MAX_BUDGET_TOKENS,
    MAX_MEMORIES_PER_ADD,
    MAX_MESSAGE_CHARS,
    MAX_PAGE,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    Id,
    JsonObject,
    Mode,
)
from mnemoray.schemas.compile import AgentIn
from mnemoray.schemas.memories import MemoryIn, RecallFiltersIn, with_agent

Query = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)]
Message = Annotated[str, StringConstraints(max_length=MAX_MESSAGE_CHARS)]
# A memory: its text alone, or the HTTP API's memory object (one schema, so a rejected
# argument names the field of MemoryIn rather than each branch of a union).
MemoryArg = Annotated[
    MemoryIn,
    BeforeValidator(
        lambda v: {"text": v} if isinstance(v, str) else v, json_schema_input_type=str | MemoryIn
    ),
]
RESOURCE_PAGE = 200  # memories per read of the memories resource
PROFILE_MAX_ROWS = 50_000  # a profile reads at most this many memories (then complete=false)


@dataclass(frozen=True)
class Tenant:
    """The one (app, user) a server answers for; ``agent_name``: the agent it recalls as
    (it also sees that agent's agent-only memories: mnemoray.memory.store.scopes), fixed like
    the user, so a prompt cannot read another agent's memories."""

    app_name: str
    user_id: str
    agent_name: str | None = None

    def __post_init__(self) -> None:
        for name in ("app_name", "user_id"):
            value = getattr(self, name)
            if (
                not isinstance(value, str)
                or not value.strip()
                or any(ord(c) < 32 or ord(c) == 127 for c in value)
            ):
                raise InvalidInput(
                    "must be a non-empty string without control characters", field=name
                )
        if self.agent_name is not None:
            check_agent_name(self.agent_name)

    @property
    def uri(self) -> str:
        """The resources' URI prefix: ``mnemoray://users/<app>/<user>``."""
        return f"mnemoray://users/{quote(self.app_name, safe='')}/{quote(self.user_id, safe='')}"


def _stored(out: dict[str, Any]) -> dict[str, Any]:
    """An add's answer for a model: the counts, and each stored record's id, kind, text."""
    return {
        "added": out["added"],
        "duplicates": out.get("duplicates", 0),
        "status": out.get("status"),
        "memories": [
            {k: m.get(k) for k in ("memory_id", "kind", "text")} for m in out.get("memories", ())
        ],
    }


def _package_version() -> str:
    try:
        return version("mnemoray")
    except PackageNotFoundError:
        return "0"


def in_view(page: dict[str, Any], tenant: Tenant) -> dict[str, Any]:
    """A page of memories without other agents' agent-only ones (the cursor stays)."""
    return {
        **page,
        "memories": [
            m for m in page["memories"] if m.get("agent_name") in ("", None, tenant.agent_name)
        ],
    }


def read_all_memories(
    backend: Backend, tenant: Tenant, limit: int = PROFILE_MAX_ROWS
) -> tuple[list[dict[str, Any]], bool]:
    """The tenant's live memories in its agent's view (at most ``limit``) and whether
    that was all."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(out) < limit:
        page = in_view(
            backend.list_memories(
                tenant.app_name, tenant.user_id, cursor, min(MAX_PAGE, limit - len(out))
            ),
            tenant,
        )
        out.extend(page["memories"])
        cursor = page.get("next_cursor")
        if not cursor:
            return out, True
    return out, False


def erase_token(tenant: Tenant, secret: bytes) -> str:
    """The confirm token of ``forget_everything`` for ``tenant``: made from a secret of
    this server process, so only a first call (which shows it) can lead to the second."""
    key = f"{tenant.app_name}\0{tenant.user_id}".encode()
    return hmac.new(secret, key, hashlib.sha256).hexdigest()[:32]


def build_server(backend: Backend, tenant: Tenant, *, allow_erase: bool = False) -> MnemorayMCP:
    """The MCP server for ``tenant``'s memories in ``backend``. ``allow_erase``: offer
    ``forget_everything`` (off by default: an erasure cannot be undone, and a model may
    be steered by what it reads into calling any tool it has)."""
    app, user = tenant.app_name, tenant.user_id
    mcp = MnemorayMCP(
        "mnemoray",
        version=_package_version(),
        log_level="WARNING",
        instructions=(
            f"Long-term memory of user {user!r} in app {app!r} ({backend.where}). Call "
            "`recall` before answering anything that depends on the user's past; "
            "`remember` durable facts the user states; `forget` by id, or by query with "
            "dry_run first and then its confirm_token. Resources: the user's memories and "
            "profile."
        ),
    )

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    @tool_errors
    def recall(
        query: Query,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K)] = 5,
        mode: Mode | None = None,
        filters: RecallFiltersIn | None = None,
        budget_tokens: Annotated[int | None, Field(ge=1, le=MAX_BUDGET_TOKENS)] = None,
    ) -> dict[str, Any]:
        """Recall the user's memories that best match `query`, best first. Each memory has
        its text, kind, date, score and provenance (the session it came from). `mode`:
        hybrid (default), dense or keyword; `filters`: session_id, after/before (ISO-8601
        or epoch seconds), kinds; `budget_tokens`: the best memories whose text fits in
        that many tokens, none repeating another."""
        flt = with_agent(filters, tenant.agent_name)
        out = backend.recall(app, user, query, top_k, flt, mode, budget_tokens)
        return {"memories": out["memories"]}

    @mcp.tool(
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        )
    )
    @tool_errors
    def remember(
        memories: Annotated[list[MemoryArg], Field(min_length=1, max_length=MAX_MEMORIES_PER_ADD)]
        | None = None,
        session: JsonObject | None = None,
        agent_only: bool = False,
    ) -> dict[str, Any]:
        """Store memories of the user. Either `memories`: texts (or objects with `text`
        and optionally `kind`, `topics`, `key_facts`, `entities`, `session_id`), stored
        as they are; or `session`: a whole conversation, {"session_id": ..., "events":
        [{"author": "user", "role": "user", "text": ...}, ...]}, distilled into summary,
        fact and chunk memories. The same content twice is stored once. `agent_only`:
        only this agent recalls them, not the app's other agents. Returns how many
        were added and the stored records."""
        if (memories is None) == (session is None):
            raise InvalidInput("pass exactly one of memories or session", field="memories")
        if agent_only and tenant.agent_name is None:
            raise InvalidInput(
                "this server recalls as no agent (start it with --agent NAME)", field="agent_only"
            )
        agent = tenant.agent_name if agent_only else None
        if session is not None:
            for name, value in (("app_name", app), ("user_id", user)):
                if session.get(name) not in (None, value):
                    raise InvalidInput(
                        f"this server stores memories of {name} {value!r} only; leave it out",
                        field=f"session.{name}",
                    )
            return _stored(backend.add_session(app, user, session, agent_name=agent))
        for i, m in enumerate(memories or ()):
            if m.agent_name is not None:  # the agent is the server's, fixed at start
                raise InvalidInput(
                    "not a memory's own field here; pass agent_only: true",
                    field=f"memories[{i}].agent_name",
                )
        items = [
            {**m.model_dump(exclude_none=True), **({"agent_name": agent} if agent else {})}
            for m in memories or ()
        ]
        return _stored(backend.add_memories(app, user, items))

    @mcp.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    @tool_errors
    def forget(
        memory_id: Id | None = None,
        query: Query | None = None,
        dry_run: bool = False,
        confirm: Annotated[str, StringConstraints(min_length=1, max_length=16_384)] | None = None,
        memory_ids: Annotated[list[Id], Field(min_length=1, max_length=MAX_FORGET_PREVIEW)]
        | None = None,
        top_k: Annotated[int, Field(ge=1, le=MAX_FORGET_PREVIEW)] = 10,
    ) -> dict[str, Any]:
        """Forget memories of the user. By id: `memory_id`. By query, in two steps:
        `query` with `dry_run: true` lists what would go (nothing is removed) and returns
        a `confirm_token`; then `confirm: <token>` (optionally `memory_ids`, a subset of
        the preview) forgets exactly those memories and nothing written since."""
        if memory_id is not None:
            if query is not None or confirm is not None or memory_ids is not None or dry_run:
                raise InvalidInput(
                    "pass memory_id alone; query, dry_run, confirm and "
                    "memory_ids are the forget by query",
                    field="memory_id",
                )
            n = backend.forget_memory(app, user, memory_id)
            if not n:
                raise NotFound(f"no live memory {memory_id!r} of this user", field="memory_id")
            return {"forgotten": n, "memory_ids": [memory_id]}
        if query is None and confirm is None:
            raise InvalidInput(
                "pass memory_id, or query with dry_run: true, or the confirm_token of a preview",
                field="query",
            )
        return backend.forget_by_query(
            app,
            user,
            dry_run=dry_run,
            query=query,
            top_k=top_k,
            confirm=confirm,
            memory_ids=memory_ids,
        )

    if allow_erase:
        token = erase_token(tenant, secrets.token_bytes(32))

        @mcp.tool(
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=True,
                open_world_hint=False,
            )
        )
        @tool_errors
        def forget_everything(
            confirm: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None,
            reason: Annotated[str, StringConstraints(max_length=500)] = "",
        ) -> dict[str, Any]:
            """Erase everything stored about the user, for good: queued ingestion jobs,
            every session and artifact, then every memory and graph row. In two steps:
            without `confirm` nothing is removed and the answer holds a `confirm_token`;
            call again with `confirm: <token>` to erase. Answers what was removed, per
            kind; a second erasure answers zeros."""
            if confirm is None:
                return {
                    "erased": False,
                    "erases": f"every job, session, artifact and memory of user {user!r} "
                    f"in app {app!r}",
                    "confirm_token": token,
                }
            if not hmac.compare_digest(confirm, token):
                raise InvalidInput(
                    "not this server's confirm_token: call without confirm first",
                    field="confirm",
                )
            return {"erased": True, **backend.forget_everything(app, user, reason)}

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    @tool_errors
    def compile_context(
        session_id: Id,
        agent: AgentIn,
        new_message: Message | None = None,
        temp_state: JsonObject | None = None,
    ) -> dict[str, Any]:
        """Compile the working context of one model call for a stored session of the user:
        the system instruction, contents, tool declarations and token counts an `agent`
        (name, static_instruction, instruction template, token_budget, memory_preload,
        ...) would be sent, with `new_message` as the user's next turn."""
        # The memory block is the server's agent's view, whatever agent.name says: the
        # agent is pinned like the user (--agent; none: the shared memories only).
        return backend.compile(
            app,
            user,
            session_id,
            agent.model_dump(),
            new_message,
            temp_state,
            memory_agent=tenant.agent_name or "",
        )

    base = tenant.uri

    @mcp.resource(
        f"{base}/memories",
        name="memories",
        mime_type="application/json",
        description=f"The live memories of user {user!r} in app {app!r} (other "
        f"agents' agent-only ones left out), oldest "
        f"first, {RESOURCE_PAGE} per read; `next_cursor` continues at "
        f"{base}/memories?cursor=<next_cursor>.",
    )
    @resource_errors
    def memories() -> str:
        return json.dumps(
            in_view(backend.list_memories(app, user, None, RESOURCE_PAGE), tenant),
            ensure_ascii=False,
        )

    @mcp.resource(
        f"{base}/memories{{?cursor}}",
        name="memories-page",
        mime_type="application/json",
        description="A later page of the user's memories.",
    )
    @resource_errors
    def memories_page(cursor: str = "") -> str:
        return json.dumps(
            in_view(backend.list_memories(app, user, cursor or None, RESOURCE_PAGE), tenant),
            ensure_ascii=False,
        )

    @mcp.resource(
        f"{base}/profile",
        name="profile",
        mime_type="application/json",
        description=f"What the store knows about user {user!r}: memories per kind, "
        "sessions, first and last dates, top topics, recent facts and open "
        "threads, all from the stored memories.",
    )
    @resource_errors
    def profile() -> str:
        rows, complete = read_all_memories(backend, tenant)
        return json.dumps(
            {**build_profile(app, user, rows, complete), "backend": backend.where},
            ensure_ascii=False,
        )

    return mcp
