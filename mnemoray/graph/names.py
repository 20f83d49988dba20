"""Names in a sentence and what kind of thing each names (the deterministic extractor).

A name is a run of capitalised words ("Melanie", "New York", "Bank of America");
function words, greetings and pronouns around it are dropped. Its type comes from
the words around and inside it: "my sister Anna" and "Anna said" name a person,
"in Berlin" and "Lake Tahoe" a place, "works at Acme" and "Acme Labs" an organisation;
the rest are things. Dates and periods are read by :mod:`mnemoray.temporal`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mnemoray.temporal import CALENDAR_WORDS

_UPPER = "A-ZÀ-ÖØ-Þ"
_LOWER = "a-zß-öø-ÿ"
_NAME_WORD = rf"[{_UPPER}][{_LOWER}{_UPPER}'\-]*"
_JOINERS = r"(?:of|de|da|del|della|der|di|du|van|von|la|le|al|&)"
NAME = rf"{_NAME_WORD}(?:\s+(?:{_JOINERS}\s+)?{_NAME_WORD}){{0,3}}"
_NAME_RUN = re.compile(rf"(?<![\w'\-]){NAME}")

_NOT_NAMES_TEXT = """
i i'm i've i'll i'd im ive the a an this that these those my your his her our their its it
it's we you he she they me us them hi hey hello dear thanks thank please yes no ok okay oh wow
yeah yep nope sure great well so and but or also just what when where why how who whom which
whose did do does is are was were have has had can could would should will shall may might
must let let's lets sounds sound congrats congratulations good nice awesome cool love haha lol
omg aw aww hmm um uh anyway btw by the way if then there here now today tomorrow yesterday
tonight not never always maybe perhaps actually honestly really totally definitely glad happy
sorry excited amazing wonderful beautiful interesting exactly absolutely right true as at in on
of for from with to into about after before since until while because though although once
speaking same thx ty bye goodbye cheers welcome morning evening afternoon night mom dad mum
mr mrs ms dr prof miss sir last next early late mid see called tool
"""
NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split()) | CALENDAR_WORDS
# Words a name run must not end with ("Melanie's", "Anna and").
_TRAILING = frozenset(
    {
        "and",
        "&",
        "of",
        "de",
        "da",
        "del",
        "della",
        "der",
        "di",
        "du",
        "van",
        "von",
        "la",
        "le",
        "al",
    }
)

KIN = (
    "sister",
    "brother",
    "mom",
    "mother",
    "mum",
    "dad",
    "father",
    "son",
    "daughter",
    "wife",
    "husband",
    "partner",
    "boyfriend",
    "girlfriend",
    "friend",
    "best friend",
    "cousin",
    "aunt",
    "uncle",
    "niece",
    "nephew",
    "grandma",
    "grandmother",
    "grandpa",
    "grandfather",
    "boss",
    "colleague",
    "coworker",
    "neighbor",
    "neighbour",
    "roommate",
    "mentor",
    "kid",
    "child",
    "baby",
    "fiance",
    "fiancé",
    "fiancee",
    "fiancée",
)
PETS = (
    "dog",
    "cat",
    "puppy",
    "kitten",
    "pup",
    "bird",
    "parrot",
    "hamster",
    "rabbit",
    "bunny",
    "horse",
    "fish",
    "turtle",
    "snake",
    "pet",
    "guinea pig",
)
_KIN_RE = "|".join(sorted(KIN, key=len, reverse=True))
_ORG_WORDS_TEXT = """university college school academy hospital clinic bank company corp
corporation inc llc ltd co labs lab group foundation institute agency church club center centre
studio studios cafe café restaurant bakery museum library team department association society
council ministry office store shop gym bar pub hotel magazine press records"""
_ORG_WORDS = frozenset(_ORG_WORDS_TEXT.split())
_PLACE_WORDS_TEXT = """city town village street st avenue ave road rd park lake river
mountain mountains mount mt beach island islands county state province valley bay coast
canyon forest desert falls springs hills heights square"""
_PLACE_WORDS = frozenset(_PLACE_WORDS_TEXT.split())

_BEFORE = (
    (
        "person",
        re.compile(
            rf"\b(?:my|his|her|our|their|your)\s+(?:little\s+|older\s+|younger\s+"
            rf"|big\s+|twin\s+|new\s+|old\s+)?(?:{_KIN_RE})\s*,?\s*$",
            re.I,
        ),
    ),
    ("person", re.compile(r"\b(?:mr|mrs|ms|miss|dr|prof)\.?\s*$", re.I)),
    ("thing", re.compile(rf"\b(?:{'|'.join(PETS)})s?\s+(?:named|called)\s*$", re.I)),
    (
        "person",
        re.compile(
            r"\b(?:named|called|with|met|meet|meeting|married|marry|dating"
            r"|thanks|thank you|hi|hey|hello|dear|congrats|congratulations)\s*,?\s*$",
            re.I,
        ),
    ),
    (
        "org",
        re.compile(
            r"\b(?:work(?:s|ed|ing)?\s+(?:at|for)|job\s+(?:at|with)|joined|employed\s+by"
            r"|intern(?:ship)?\s+at|position\s+at|role\s+at|interview(?:ed)?\s+(?:at|with)"
            r"|hired\s+by)\s*$",
            re.I,
        ),
    ),
    (
        "place",
        re.compile(
            r"\b(?:in|to|from|near|visit(?:ed|ing)?|around|across|through|toward"
            r"|towards|outside|live[sd]?\s+in|moved\s+to|trip\s+to|flew\s+to"
            r"|back\s+to)\s*$",
            re.I,
        ),
    ),
)
_AFTER = (
    (
        "person",
        re.compile(
            r"^\s*(?:said|says|told|asked|thinks|thought|is my|was my|and I\b"
            r"|wants|loves|called|texted|visited)",
            re.I,
        ),
    ),
    ("org", re.compile(r"^\s*(?:Inc|Corp|LLC|Ltd|GmbH)\b")),
)


@dataclass(frozen=True)
class Name:
    """A name found in a sentence: its words, where, and the type its context says."""

    text: str
    begin: int
    end: int
    type: str  # person, place, org or thing
    initial: bool  # starts the sentence: capitalised anyway, weaker evidence


def find_names(sentence: str) -> list[Name]:
    """The names in ``sentence``, in order, each with the type its context suggests."""
    lead = len(sentence) - len(sentence.lstrip("-*•>\"'([ \t"))
    out: list[Name] = []
    for m in _NAME_RUN.finditer(sentence):
        if sentence[m.end() : m.end() + 1] == "(":
            continue  # "Search(query=...)": a function in a tool call's line, not a name
        words = m.group(0).split()
        begin = m.start()
        while words and _not_a_name(words[0]):
            begin += len(words[0])
            begin += len(sentence[begin:]) - len(sentence[begin:].lstrip())
            words.pop(0)
        while words and (_not_a_name(words[-1]) or words[-1].lower() in _TRAILING):
            words.pop()
        if not words:
            continue
        text = re.sub(r"['\u2019]s$", "", " ".join(words))
        if len(text) < 2 or text.isupper() and len(text) > 5:  # "OK", shouting
            continue
        end = begin + len(" ".join(words))
        out.append(Name(text, begin, end, _type_of(sentence, begin, end, text), begin == lead))
    return out


def _not_a_name(word: str) -> bool:
    """A word no name starts or ends with: a function word, a month or weekday (also
    as "Monday's" or "Mid-May": dates are read by :mod:`mnemoray.temporal`), a greeting."""
    word = re.sub(r"['\u2019]s$", "", word.lower().rstrip(","))
    return word in NOT_NAMES or all(part in NOT_NAMES for part in word.split("-"))


def _type_of(sentence: str, begin: int, end: int, text: str) -> str:
    last = text.split()[-1].lower().rstrip(".")
    if last in _ORG_WORDS:
        return "org"
    if last in _PLACE_WORDS:
        return "place"
    before, after = sentence[max(0, begin - 40) : begin], sentence[end : end + 30]
    for kind, pattern in _BEFORE:
        if pattern.search(before):
            return kind
    for kind, pattern in _AFTER:
        if pattern.search(after):
            return kind
    return "thing"


def is_name_like(author: str) -> bool:
    """Whether an event author reads as a person's name ("Melanie", not "travel_agent")."""
    return (
        bool(re.fullmatch(rf"{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}}", author))
        and author.lower() not in NOT_NAMES
    )
