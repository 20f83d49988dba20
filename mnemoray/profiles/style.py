"""How a user writes, and what they declined to talk about: counted from their turns.

Every figure is a count or a share over the user's own turns, by fixed rules, so
the same memories always give the same style (no model call):

- verbosity: mean words per turn (terse below :data:`TERSE_WORDS`, verbose above
  :data:`VERBOSE_WORDS`);
- question and exclamation shares: turns with a "?" / "!";
- specifics share: turns that give a number or a name (a capitalised word inside a
  sentence): someone who gives dates, names, specifics;
- formality: marker words (:data:`INFORMAL`, :data:`FORMAL`) per turn;
- follow-ups answered: of the other side's questions that a user turn follows, the
  share answered (not declined, at least :data:`ANSWER_WORDS` words).

A declined topic is a user turn that matches one of :data:`_DECLINE` ("I'd rather not
talk about my divorce", "please don't ask about work"); a bare refusal (a short turn
that starts "No thanks" or "I'd rather not") declines what the question before it
asked about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mnemoray.profiles.terms import words_of
from mnemoray.profiles.turns import Turn
from mnemoray.text import words

TERSE_WORDS = 8.0
VERBOSE_WORDS = 30.0
ANSWER_WORDS = 3
SAID_CHARS = 160  # a declined topic shows this much of what the user said
# Marker words (lower case): a few of each per turn tell a register apart.
INFORMAL = frozenset(
    {
        "lol",
        "haha",
        "hahaha",
        "omg",
        "gonna",
        "wanna",
        "gotta",
        "yeah",
        "yep",
        "nope",
        "hey",
        "cool",
        "awesome",
        "btw",
        "tbh",
        "kinda",
        "sorta",
        "ya",
        "thx",
        "wow",
        "yay",
        "dude",
        "stuff",
        "super",
    }
)
FORMAL = frozenset(
    {
        "please",
        "kindly",
        "regards",
        "sincerely",
        "appreciate",
        "dear",
        "furthermore",
        "however",
        "therefore",
        "moreover",
        "would",
        "could",
        "shall",
        "certainly",
        "indeed",
        "grateful",
    }
)
FORMAL_MARGIN = 0.15  # markers per turn one register must lead the other by
_NUMBER = re.compile(r"\d")
_INNER_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}")
_TOPIC = r"(?P<topic>[^.!?;,\n]{0,60})"
_ABOUT = (
    r"(?:talk(?:ing)?|speak(?:ing)?|get(?:ting)? into|go(?:ing)? into|discuss(?:ing)?|"
    r"shar(?:e|ing)|chat(?:ting)?)(?: about)?"
)
_DECLINE = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\b(?:i'?d|i would) (?:rather|prefer) not (?:to )?{_ABOUT}\s*{_TOPIC}",
        rf"\b(?:i )?(?:don'?t|do not) (?:really )?(?:want|wish|like) to {_ABOUT}\s*{_TOPIC}",
        rf"\b(?:let'?s|can we|could we) not {_ABOUT}\s*{_TOPIC}",
        rf"\b(?:please )?(?:don'?t|do not) ask(?: me)? about\s*{_TOPIC}",
        rf"\bi'?m not (?:comfortable|ready) {_ABOUT}\s*{_TOPIC}",
        rf"\b(?:i'?d )?(?:rather|prefer to) (?:skip|leave out|pass on)\s*{_TOPIC}",
    )
]
_BARE = re.compile(
    r"^\W*(?:no,? thanks?(?: you)?|no thank you|i'?d rather not|"
    r"i'?d prefer not to|(?:i'?ll )?pass)\b",
    re.IGNORECASE,
)
# A bare refusal is short: "Nope, she is healthy." answers; "No thanks." declines.
BARE_WORDS = 6
_LEADING = re.compile(
    r"^(?:about|my|the|that|this|those|these|your|our|his|her|their|"
    r"any|more|it)\s+",
    re.IGNORECASE,
)
_TRAILING = re.compile(
    r"\s+(?:right now|now|anymore|today|please|here|again|with you)$", re.IGNORECASE
)
_PRONOUN = frozenset({"", "it", "that", "this", "them", "those", "things", "stuff"})


@dataclass(frozen=True)
class CommunicationStyle:
    turns: int
    words_per_turn: float
    verbosity: str  # "terse" | "moderate" | "verbose" | "unknown" (no turn)
    question_ratio: float
    exclamation_ratio: float
    specifics_ratio: float
    formality: str  # "informal" | "neutral" | "formal" | "unknown"
    informal_markers: int
    formal_markers: int
    follow_ups_asked: int
    follow_ups_answered: int


@dataclass(frozen=True)
class DeclinedTopic:
    topic: str
    said: str  # the user's words
    session_id: str
    day: str
    memory_ids: list[str]


def _clean(topic: str) -> str:
    topic = " ".join(topic.split()).strip(" ,:-\"'")
    for _ in range(3):
        topic = _TRAILING.sub("", _LEADING.sub("", topic))
    return topic.lower()


def declined_in(turn: Turn, before: Turn | None) -> str | None:
    """The topic ``turn`` declines (None: it declines nothing); ``before``: the other
    side's turn it answers."""
    asked = words_of(before.text) if before is not None and "?" in before.text else ""
    for pattern in _DECLINE:
        m = pattern.search(turn.text)
        if m:
            topic = _clean(m.group("topic"))
            if topic in _PRONOUN:  # "I'd rather not talk about it": what was asked
                return asked or None
            return topic
    if asked and _BARE.match(turn.text) and len(words(turn.text)) <= BARE_WORDS:
        return asked
    return None


def _verbosity(mean: float) -> str:
    return "terse" if mean < TERSE_WORDS else "verbose" if mean > VERBOSE_WORDS else "moderate"


def read_style(
    sessions: Sequence[Sequence[Turn]],
) -> tuple[CommunicationStyle, list[DeclinedTopic]]:
    """The style of the user's turns and the topics they declined (oldest first)."""
    n = total_words = questions = exclaims = specifics = informal = formal = 0
    asked = answered = 0
    declined: list[DeclinedTopic] = []
    for turns in sessions:
        before: Turn | None = None
        for t in turns:
            if not t.mine:
                before = t
                continue
            ws = words(t.text)
            n += 1
            total_words += len(ws)
            questions += "?" in t.text
            exclaims += "!" in t.text
            specifics += gives_specifics(t.text)
            informal += sum(w in INFORMAL for w in ws)
            formal += sum(w in FORMAL for w in ws)
            topic = declined_in(t, before)
            if before is not None and before.text.rstrip().endswith("?"):
                asked += 1
                answered += topic is None and len(ws) >= ANSWER_WORDS
            if topic:
                declined.append(
                    DeclinedTopic(
                        topic, t.text[:SAID_CHARS], t.session_id, t.day, list(t.memory_ids)
                    )
                )
            before = None
    mean = total_words / n if n else 0.0
    lead = (formal - informal) / n if n else 0.0
    formality = (
        "unknown"
        if not n
        else "formal"
        if lead > FORMAL_MARGIN
        else "informal"
        if lead < -FORMAL_MARGIN
        else "neutral"
    )
    style = CommunicationStyle(
        turns=n,
        words_per_turn=round(mean, 2),
        verbosity=_verbosity(mean) if n else "unknown",
        question_ratio=round(questions / n, 3) if n else 0.0,
        exclamation_ratio=round(exclaims / n, 3) if n else 0.0,
        specifics_ratio=round(specifics / n, 3) if n else 0.0,
        formality=formality,
        informal_markers=informal,
        formal_markers=formal,
        follow_ups_asked=asked,
        follow_ups_answered=answered,
    )
    return style, declined


def gives_specifics(text: str) -> bool:
    """A number or a name inside a sentence: what makes a statement specific."""
    return bool(_NUMBER.search(text) or _INNER_NAME.search(text))


__all__ = ["CommunicationStyle", "DeclinedTopic", "declined_in", "gives_specifics", "read_style"]
