"""The speaker axis of recall: whose words a question asks about, and how much of each
record the user said.

A question in the first person ("How many classes do I take?", "What degree did I
graduate with?") asks about what the user said of themselves; one about the
assistant's own words ("the cartoon you mentioned", "remind me what you suggested")
asks about what the assistant said. In a chat history both kinds of record answer the
same topic words: the user's one line "I take Zumba on Tuesdays" and the assistant's
long advice on workout routines. So the ``speaker`` signal is, per record, the share
of its words said by the side the question asks about (:func:`user_share`: a chunk's
lines by speaker, a summary's "User:" lines, a fact or a statement stored as is all
the user's), and it is zero for every record when the question asks about neither
side. It never finds a record; it re-orders what the other signals found.

Whose turn is the user's: the graph's rule (:mod:`mnemoray.graph.extract`): the author
``user`` or an author that reads as a person's name (in a two-person conversation both
people are the user's side, so the signal is then the same for every record).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from mnemoray.graph.extract import USER_AUTHORS
from mnemoray.graph.names import is_name_like
from mnemoray.memory.records.windows import EXPANSION

Side = Literal["user", "assistant"]

# The assistant's own words asked about: "you said", "the move you made", "what did you
# suggest", "tell me again", "your suggestion" ("I told you I made ..." is the user's).
# A request for new words ("can you suggest ...") is not: its verb is in the present,
# and its "I" makes it a question about the user.
_ASSISTANT = re.compile(
    r"\b(?:you|u)\s+(?:(?!i\b|we\b)\w+\s+)?(?:said|told|mentioned|suggested|recommended|gave|provided|"
    r"listed|shared|wrote|described|explained|showed|created|made|came\s+up\s+with|named|"
    r"offered|proposed|included)\b|"
    r"\b(?:tell|list|give|show)\s+(?:me\s+)?again\b|"
    r"\bdid\s+(?:you|u)\s+(?:(?!i\b|we\b)\w+\s+)?(?:say|tell|mention|suggest|recommend|give|provide|list|"
    r"share|write|describe|explain|show|create|make|come\s+up\s+with|name|offer|propose|"
    r"include)\b|"
    r"\byour\s+(?:suggestions?|recommendations?|advice|answer|list|response|explanation|story|"
    r"description)\b",
    re.IGNORECASE,
)
# "Remind me of / what ..." asks for earlier words ("remind me to ..." asks for a
# reminder): the assistant's unless what follows is about
# the user ("remind me what I said", "remind me when my appointment is") or both ("the
# animal we talked about").
_REMIND = re.compile(
    r"\bremind\s+me\s+((?:of|about|what|which|who|when|where|how|the|that)\b.*)",
    re.IGNORECASE | re.DOTALL,
)
_OURS = re.compile(r"\b(?:we|us|our|ours|we've|we'd)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.IGNORECASE)
# A chunk line: "[2023-05-20] speaker: words" or "... speaker (part 2/3): words" (a
# chunk's key names the date only where it changes); a summary line: "User: words".
_LINE = re.compile(r"^(\[\d{4}-\d\d-\d\d\] )?([^:\n]{1,60}?)(?: \(part \d+/\d+\))?: ", re.M)
# An undated line starts a turn only under a role's name ("assistant", "travel_agent")
# or a speaker already seen on a dated line; else ("Breakfast: eggs") it goes on the
# line before.
_ROLE = re.compile(r"[a-z][a-z0-9_]*")
# Kinds whose words are all the user's own (distilled facts, statements added as is).
_TURNS = frozenset({"chunk", "session_summary", "compaction_summary"})


def asked_side(query: str) -> Side | None:
    """The side whose words ``query`` asks about, or None."""
    if _ASSISTANT.search(query):
        return "assistant"
    remind = _REMIND.search(query)
    rest = remind.group(1) if remind is not None else None
    if rest is not None and not _FIRST_PERSON.search(rest) and not _OURS.search(rest):
        return "assistant"
    if _FIRST_PERSON.search(query):
        return "user"
    return None


def is_user_side(speaker: str) -> bool:
    return speaker.lower() in USER_AUTHORS or is_name_like(speaker)


def user_share(kind: str, text: str) -> float:
    """Share of ``text``'s characters (a record's text or its key) said by the user's
    side: by speaker line for a chunk or a summary (a line without a speaker belongs
    to the one before it; a summary whose lines name none is all the user's), 1 for
    any other record."""
    if kind not in _TURNS:
        return 1.0
    text = EXPANSION.sub("", text)
    seen: set[str] = set()
    starts = []
    for m in _LINE.finditer(text):
        label = m.group(2).strip()
        if m.group(1) or label in seen or _ROLE.fullmatch(label) or label == "User":
            seen.add(label)
            starts.append((m.start(), m.end(), label))
    if not starts:
        return 1.0
    mine = total = 0
    for i, (_, body, label) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        n = end - body
        total += n
        if is_user_side(label):
            mine += n
    return mine / total if total else 1.0


def speaker_signal(side: Side | None, shares: np.ndarray) -> np.ndarray | None:
    """Per record, the share of its words said by ``side``; None when the question asks
    about neither (the signal is then absent, not a constant)."""
    if side is None:
        return None
    return shares if side == "user" else 1.0 - shares


def user_shares(kinds: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    return np.fromiter(
        (user_share(k, t or "") for k, t in zip(kinds, texts, strict=True)),
        dtype=np.float64,
        count=len(kinds),
    )


__all__ = ["Side", "asked_side", "is_user_side", "speaker_signal", "user_share", "user_shares"]
