"""Decisions and commitments found by wording (the extractive summarizer's).

Conservative on purpose: a sentence counts only when it says so plainly ("we decided
...", "let's go with ...", "I'll send ..."), so a record never claims a decision or a
promise nobody made. Each item is prefixed with who said it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mnemoray.sessions.events import Event
from mnemoray.text import split_sentences

_FILLER = re.compile(
    r"^(?:(?:ok|okay|great|perfect|sure|yes|yeah|alright|so|then|and|"
    r"fine)\b[,!.:;\s-]*)+",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"^(?:(?:we|i)\s+(?:have\s+|'ve\s+)?(?:decided|agreed|chose|settled\s+on)\b"
    r"|let'?s\s+(?:go\s+with|book|pick|use|take|choose|stick\s+with)\b"
    r"|(?:the\s+)?decision\s+is\b)",
    re.IGNORECASE,
)
_COMMITMENT = re.compile(
    r"^(?:i|we)\s*(?:'ll|\s+will|\s+shall|'m\s+going\s+to|\s+am\s+going\s+to|"
    r"\s+promise\s+to|\s+commit\s+to)\s+(?!not\b|probably\b|maybe\b|perhaps\b)\w",
    re.IGNORECASE,
)
MAX_ITEMS = 8


def outcomes(events: Sequence[Event]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(decisions, commitments) stated in the messages of ``events``, in order."""
    decisions: dict[str, None] = {}
    commitments: dict[str, None] = {}
    for e in events:
        if e.type != "message" or e.partial or e.role not in ("user", "model"):
            continue
        for sentence in split_sentences(e.text.replace("\u2019", "'").strip()):
            if sentence.endswith("?"):
                continue
            body = _FILLER.sub("", sentence)
            if _DECISION.match(body) and len(decisions) < MAX_ITEMS:
                decisions.setdefault(f"{e.author}: {sentence}", None)
            elif _COMMITMENT.match(body) and len(commitments) < MAX_ITEMS:
                commitments.setdefault(f"{e.author}: {sentence}", None)
    return tuple(decisions), tuple(commitments)


__all__ = ["outcomes"]
