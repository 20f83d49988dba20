"""Which way a sentence leans in time, for a date it names without a year.

"I started the job in June", said in May, is last June; "we will fly out in March",
said in May, is next March. ``lean_at`` reads the sentence around a time expression for
cues of the past (past auxiliaries and common irregular verbs, "ago", a subject followed
by an ``-ed`` verb) and of the future ("will", "'ll", "going to", "plan to", "I'm
moving"). A sentence with cues of one side only leans that way; one with both, or none,
leans neither and the caller keeps its default (the nearest year, the past preferred).
Deterministic and stdlib only.
"""

from __future__ import annotations

import re
from typing import Literal

Lean = Literal["past", "future"] | None

# Who did it: a pronoun, a name, or "my sister".
_SUBJECT = (r"(?:I|[Ww]e|[Tt]hey|[Hh]e|[Ss]he|[Yy]ou|[A-Z][a-z]+"
            r"|(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir)\s+[a-z]+)")
_FUTURE = re.compile(
    r"(?i:\b(?:will|won't|shall|gonna|going\s+to|plan(?:s|ning)?\s+to|about\s+to"
    r"|intend(?:s|ing)?\s+to|scheduled|upcoming|looking\s+forward)\b|'ll\b)"
    r"|\b(?:I'm|I\s+am|[Ww]e're|[Ww]e\s+are|[Tt]hey're|[Tt]hey\s+are|[Hh]e's|[Ss]he's"
    r"|[Yy]ou're)\s+(?:[a-z]+ly\s+)?[a-z]+ing\b")
_PAST = re.compile(
    r"(?i:\b(?:was|were|did|didn't|had|went|came|took|made|saw|met|spent|bought|ago"
    r"|used\s+to|back\s+in)\b|(?<!'ve\s)(?<!have\s)\bgot\b)"
    rf"|\b{_SUBJECT}\s+(?:(?:just|finally|recently|already|also|actually|then|first|only"
    rf"|even|never)\s+)?[a-z]{{2,}}(?<!e)ed\b")  # not "need", "feed"
# Where a sentence ends: its stop and the space after it (an abbreviation such as
# "St. Mary's" cuts a sentence short, which only narrows where cues are looked for).
_BREAK = re.compile(r"[.!?;\n](?:\s|$)")


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` that holds ``text[start:end]``."""
    begin = 0
    for m in _BREAK.finditer(text, 0, start):
        begin = m.end()
    stop = _BREAK.search(text, end)
    return text[begin:stop.end() if stop else len(text)]


def lean_at(text: str, start: int, end: int) -> Lean:
    """The way the sentence around ``text[start:end]`` leans (None: neither or both)."""
    sentence = sentence_around(text, start, end)
    past = _PAST.search(sentence) is not None
    future = _FUTURE.search(sentence) is not None
    if past == future:
        return None
    return "past" if past else "future"


__all__ = ["Lean", "lean_at", "sentence_around"]
