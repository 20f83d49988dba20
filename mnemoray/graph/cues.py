"""Which typed relations a question asks about, from its words.

"Which city does Alex live in now?" asks ``lives_in``; "what does she do for work?"
``works_at``; "tell me about his family" the kinship relations. Recall follows the
facts of the relations a question asks (:mod:`mnemoray.graph.recall`), so the cue
words are those a question about that relation uses, not the words of its statements
(those are :mod:`mnemoray.graph.patterns`).
"""

from __future__ import annotations

import re

from mnemoray.graph.names import PETS

_FAMILY = r"family|relatives?|siblings?|parents?|kids?|children"
# relation type -> the words of a question about it (whole words, any case).
_CUES: dict[str, str] = {
    "lives_in": r"live[sd]?|(?<!a )living|city|town|home|moved?|reside[sd]?|based",
    "works_at": r"jobs?|work(?:s|ed|ing)?|employer|employed|company|career|profession"
    r"|occupation|joined|colleagues?|coworkers?|boss|for a living",
    "grew_up_in": r"childhood|grew up|grow up|raised|roots|originally|hometown|born",
    "adopted": r"pets?|adopt(?:ed|s)?|" + "|".join(f"{p}s?" for p in PETS),
    "owns": r"own(?:s|ed)?|bought|buy|cars?|vehicles?|drive[sn]?|driving",
    "enjoys": r"into|hobby|hobbies|pastimes?|passion|relax|unwind|free time|spare time"
    r"|for fun",
    "visited": r"travell?(?:ed|ing|s)?|trips?|visit(?:s|ed)?|vacations?|holidays?|been to",
    "married_to": r"married|marriage|wife|husband|spouse|" + _FAMILY,
    "partner_of": r"partner|boyfriend|girlfriend|dating|relationship",
    "sister_of": r"sisters?|" + _FAMILY,
    "brother_of": r"brothers?|" + _FAMILY,
    "mother_of": r"mom|mum|mother|" + _FAMILY,
    "father_of": r"dad|father|" + _FAMILY,
    "daughter_of": r"daughters?|" + _FAMILY,
    "son_of": r"sons?|" + _FAMILY,
    "friend_of": r"friends?|friendship",
}
_PATTERNS = {t: re.compile(rf"\b(?:{words})\b", re.IGNORECASE) for t, words in _CUES.items()}


def asked_relations(question: str) -> frozenset[str]:
    """The typed relations ``question`` asks about (empty: none it names)."""
    return frozenset(t for t, p in _PATTERNS.items() if p.search(question))


__all__ = ["asked_relations"]
