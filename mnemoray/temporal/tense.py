"""Which way a clause leans in time, for a date it names without a year.

"I started the job in June", said in May, is last June; "we will fly out in March",
said in May, is next March. ``lean_at`` reads the clause that holds a time expression
(cut at commas and at words that open another clause or a phrase of its own: "for",
"about", "after", "from", "and", "that"...) for cues of the past (a subject followed by a
past verb: "I moved", "we went", "she was") and of the future ("will", "'ll", "going to"
before a verb, "plan to", "I'm moving", "we're flying"). A clause with cues of one side
only leans that way; one with both, or none, leans neither and the caller keeps its
default (the nearest year, the past preferred). A question asked in the past ("What did
we talk about on January 11?", "When was I in Rome in May?") asks about the past: a
clause of it with no cue of its own leans past, wherever the question's verb stands.
Cutting at the clause keeps "I booked a hotel | for our trip in August" and "I'm feeling
better | after the surgery in April" from moving the date a year. Deterministic and stdlib only.
"""

from __future__ import annotations

import re
from typing import Literal

Lean = Literal["past", "future"] | None

# Who did it: a pronoun or "my sister" (a bare capitalised word is too often an adverb:
# "Very interested in ...").
_SUBJECT = (
    r"(?:\b(?:I|[Ww]e|[Tt]hey|[Hh]e|[Ss]he|[Yy]ou|[Ii]t|[Tt]here)"
    r"|\b(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir)\s+[a-z]+)"
)
_ADVERB = r"(?:(?:just|finally|recently|already|also|actually|then|first|only|even|never)\s+)?"
_PAST_VERBS = (
    "was|were|did|didn't|had|went|came|took|made|saw|met|spent|bought|got|left"
    "|grew|began|flew|drove|ran|wrote|sold|found|gave|moved|started"
)
_PAST = re.compile(
    rf"{_SUBJECT}\s+{_ADVERB}(?:(?:{_PAST_VERBS})\b|[a-z]{{2,}}(?<!e)ed\b)"  # not "need"
    r"|(?i:\b(?:ago|used\s+to)\b)"
)
# Remembering or missing is about what happened: "I'll never forget the trip in March".
_NOT_AHEAD = r"(?!\s+(?:(?:never|always)\s+)?(?:forget|remember|miss)\b)"
# Verbs that, after "I'm"/"we're", speak of an arrangement ahead: "we're flying out".
_PLANS = (
    "moving|flying|leaving|going|starting|visiting|travell?ing|heading|coming|meeting"
    "|staying|returning|joining|hosting|attending|driving|graduating|relocating"
    "|celebrating|getting\\s+married"
)
_FUTURE = re.compile(
    rf"(?i:\b(?:will|won't|shall){_NOT_AHEAD}\b|'ll\b{_NOT_AHEAD}"
    r"|\b(?:gonna|plan(?:s|ning)?\s+to|about\s+to|intend(?:s|ing)?\s+to|scheduled for"
    r"|upcoming|looking\s+forward)\b"
    r"|\bgoing\s+to\s+(?!(?:the|a|an|my|our|your|his|her|their|this|that|see)\b)[a-z]+)"
    rf"|\b(?:I'm|I\s+am|[Ww]e're|[Ww]e\s+are|[Tt]hey're|[Tt]hey\s+are|[Hh]e's|[Ss]he's"
    rf"|[Yy]ou're)\s+(?:[a-z]+ly\s+)?(?:{_PLANS})\b"
)
# A question whose verb is past ("what did we", "did you", "when was I"): it asks about
# what happened. Its auxiliary opens the sentence or follows the question word.
_PAST_QUESTION = re.compile(
    r"^\s*(?:(?:what|when|where|who|whom|which|how|why)\b[^.!?\n]{0,40}?\s)?"
    r"(?:did|was|were|had)\s+"
    rf"{_SUBJECT}",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?\n]")

# Where a clause ends: a stop, a comma or dash, or a word that opens another clause or a
# phrase of its own. An abbreviation ("St. Mary's") cuts a clause short, which only
# narrows where cues are looked for.
_BREAK = re.compile(
    r"[.!?;:,()\n\u2014]|\s(?i:and|but|or|so|because|after|before|from|for"
    r"|about|that|which|who|when|while|if|though|although)\s"
)


def clause_around(text: str, start: int, end: int) -> str:
    """The clause of ``text`` that holds ``text[start:end]``."""
    begin = 0
    for m in _BREAK.finditer(text, 0, start):
        begin = m.end()
    stop = _BREAK.search(text, end)
    return text[begin : stop.start() if stop else len(text)]


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` that holds ``text[start:end]`` (its end mark included)."""
    begin = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        begin = m.end()
    stop = _SENTENCE_END.search(text, end)
    return text[begin : stop.end() if stop else len(text)]


def lean_at(text: str, start: int, end: int) -> Lean:
    """The way the clause around ``text[start:end]`` leans (None: neither or both)."""
    clause = clause_around(text, start, end)
    past = _PAST.search(clause) is not None
    future = _FUTURE.search(clause) is not None
    if past != future:
        return "past" if past else "future"
    if not past and _asks_about_the_past(sentence_around(text, start, end)):
        return "past"
    return None


def _asks_about_the_past(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") and _PAST_QUESTION.search(sentence) is not None


__all__ = ["Lean", "clause_around", "lean_at", "sentence_around"]
