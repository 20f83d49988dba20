"""The user's profile in the context (opt-in per agent: ``AgentSpec.user_profile``).

The profile (:mod:`mnemoray.profiles`) changes once per ingested session, not per
call, so it goes into the system instruction as a stable block (not per-call), before
the state-templated instruction (which may change every turn): a prefix cache holds it
until the profile changes. The block's sha256 is traced
(``profile_hash``) so prefix stability stays measurable: equal hashes across calls
mean the block did not move. The block shows no store version or clock, so a commit
that leaves the profile as it was leaves the hash as it was.

Like recalled memories, the profile is an enrichment: a failure of the store behind
it leaves the block out and the trace names the error (:mod:`mnemoray.compiler.
degrade`). A callee (agents as tools) gets none: it sees only what it is given.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from mnemoray.compiler.blocks import inline
from mnemoray.compiler.context import CompileContext
from mnemoray.compiler.degrade import degradable

log = logging.getLogger(__name__)

PROFILE_OPEN = "<user_profile>"
PROFILE_CLOSE = "</user_profile>"
MAX_AREAS = 8
MAX_DECLINED = 5


def profile_block(p: Mapping[str, Any]) -> str:
    """The profile as the model reads it (deterministic: same profile, same text).
    Every value is escaped (:func:`mnemoray.compiler.blocks.inline`): topics come from
    what users said, and none may close the block or start a line of its own."""
    s = p["style"]
    lines = [
        PROFILE_OPEN,
        f"What earlier conversations with this user ({inline(p['sessions'])} "
        f"sessions) show. Adapt to it; the conversation wins when they disagree.",
    ]
    areas = p["expertise"][:MAX_AREAS]
    if areas:
        lines.append(
            "Knows about: "
            + ", ".join(f"{inline(a['topic'])} ({inline(a['depth'])})" for a in areas)
            + "."
        )
    if s["turns"]:
        lines.append(
            f"Writes {inline(s['verbosity'])} messages (about {round(s['words_per_turn'])} "
            f"words), {inline(s['formality'])} register, asks questions in "
            f"{s['question_ratio']:.0%} of turns, gives specifics (numbers, names) "
            f"in {s['specifics_ratio']:.0%}."
        )
    declined = list(dict.fromkeys(inline(d["topic"]) for d in p["declined"]))[:MAX_DECLINED]
    if declined:
        lines.append("Declined to talk about: " + ", ".join(declined) + ". Do not bring these up.")
    lines.append(PROFILE_CLOSE)
    return "\n".join(lines)


class UserProfileProcessor:
    name = "user_profile"

    def process(self, ctx: CompileContext) -> None:
        source = ctx.services.user_profile
        if source is None or not ctx.agent.user_profile:
            return
        if ctx.callee is not None:
            ctx.detail["skipped"] = "callee: sees only its prompt and given artifacts"
            return
        session = ctx.session
        try:
            profile = source(session.app_name, session.user_id)
        except Exception as exc:
            if not degradable(exc):
                raise
            err = ctx.degrade(exc)
            log.warning(
                "compile of %s/%s/%s goes on without the user profile: %s: %s",
                session.app_name,
                session.user_id,
                session.session_id,
                err.error,
                exc,
                exc_info=exc,
            )
            return
        if profile is None:
            ctx.detail["skipped"] = "no memories of this user yet"
            return
        block = profile_block(profile)
        ctx.add_instruction(block)
        ctx.detail["profile_hash"] = hashlib.sha256(block.encode("utf-8")).hexdigest()
        ctx.detail["store_version"] = profile.get("store_version")
        ctx.detail["expertise"] = [a["topic"] for a in profile["expertise"][:MAX_AREAS]]
