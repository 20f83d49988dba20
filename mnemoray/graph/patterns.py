"""Typed relations read from a sentence: "I moved to Paris", "my sister Anna", "works at Acme".

Each pattern names the relation, who holds it (``I``/``we`` is the speaker) and its
object. Past forms ("used to live in", "worked at", "quit my job at") say the relation
had ended by the time it was said; change verbs ("moved to", "joined", "adopted")
say when it began, at the date named in the sentence or else when it was said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mnemoray.graph.names import NAME, PETS

_SUBJ = rf"(?P<subj>\bI\b|\b[Ww]e\b|{NAME})"
_OBJ = rf"(?P<obj>{NAME})"
_NOUN = r"(?P<noun>[a-z][a-z\-]+(?:\s+[a-z][a-z\-]+)?)"
# Animals kept as pets, by kind or breed ("our new beagle", "a corgi named Archie").
_PET_WORDS = "|".join(
    (
        *PETS,
        "beagle",
        "corgi",
        "collie",
        "greyhound",
        "retriever",
        "labrador",
        "poodle",
        "terrier",
        "spaniel",
        "husky",
        "dachshund",
        "shepherd",
        "cockatiel",
        "budgie",
        "canary",
        "lizard",
        "gecko",
        "dragon",
        "tortoise",
        "ferret",
        "chinchilla",
    )
)
# The speaker holds it, said without "I": the subject group matches nothing.
_SPEAKER = r"(?P<subj>)"
_ADV = r"(?:\s+(?:just|recently|finally|also|now|currently|still|already|officially|actually))*"
_BE = r"(?:'m|'re|'s|\s+am|\s+is|\s+are|\s+was|\s+were)?"
_HAVE = r"(?:'ve|'d|\s+have|\s+has|\s+had)?"
# "as a social worker" between a job verb and its place; "at the Harbor Youth Center".
_ROLE = r"(?:\s+as\s+(?:a|an|the)\s+[a-z][a-z\-]*(?:\s+[a-z][a-z\-]*){0,3}?)?"
_AT = r"\s+(?:at|for)\s+(?:the\s+)?"
_KIN = {
    "sister": "sister_of",
    "brother": "brother_of",
    "mom": "mother_of",
    "mum": "mother_of",
    "mother": "mother_of",
    "dad": "father_of",
    "father": "father_of",
    "daughter": "daughter_of",
    "son": "son_of",
    "friend": "friend_of",
    "best friend": "friend_of",
    "wife": "married_to",
    "husband": "married_to",
    "partner": "partner_of",
    "boyfriend": "partner_of",
    "girlfriend": "partner_of",
}
_KIN_WORDS = "|".join(sorted(_KIN, key=len, reverse=True))
_MODS = r"(?:little\s+|older\s+|younger\s+|big\s+|twin\s+|baby\s+|new\s+)?"
# Nouns that follow "bought a"/"adopted a" without being a possession.
_NOT_OWNED = frozenset(
    {
        "lot",
        "bit",
        "ticket",
        "tickets",
        "coffee",
        "drink",
        "round",
        "few",
        "couple",
        "chance",
        "moment",
        "while",
        "look",
        "new",
    }
)


@dataclass(frozen=True)
class Reading:
    """One relation read from a sentence; ``subject``/``obj`` are surface forms, with
    ``"I"`` standing for the speaker."""

    subject: str
    type: str
    obj: str
    obj_type: str  # person, place, org, thing
    confidence: float
    starts: bool  # the verb says it began then ("moved to", "adopted")
    ended: bool  # the verb says it no longer holds ("used to", "quit")


# (pattern, type, object type, starts, ended, confidence, needs). ``needs``: words of
# which every match holds at least one, in lower case: a sentence with none of them skips
# the rule's scan, since most sentences state no relation and the 35 scans cost more than
# the rest of the graph's reading (pinned against the ungated scan in
# tests/graph/test_pattern_gates.py).
_RULES: tuple[tuple[re.Pattern[str], str, str, bool, bool, float, tuple[str, ...]], ...] = tuple(
    (re.compile(p), t, o, s, e, c, n)
    for p, t, o, s, e, c, n in (
        (
            rf"{_SUBJ}\s+used\s+to\s+live\s+in\s+{_OBJ}",
            "lives_in",
            "place",
            False,
            True,
            0.85,
            ("used",),
        ),
        (
            rf"{_SUBJ}\s+(?:once\s+)?lived\s+in\s+{_OBJ}",
            "lives_in",
            "place",
            False,
            True,
            0.8,
            ("lived",),
        ),
        (
            rf"{_SUBJ}{_BE}{_HAVE}{_ADV}\s+(?:been\s+)?(?:live|lives|living|lived|reside|resides"
            rf"|residing|based|settled)\s+in\s+{_OBJ}",
            "lives_in",
            "place",
            False,
            False,
            0.9,
            ("liv", "resid", "based", "settled"),
        ),
        (
            rf"{_SUBJ}{_ADV}\s+(?:love|loves|like|likes|enjoy|enjoys)\s+living\s+in\s+{_OBJ}",
            "lives_in",
            "place",
            False,
            False,
            0.85,
            ("living",),
        ),
        # Where the speaker's home is, said without a verb of living: "our neighborhood
        # in Toronto", "life in Denver suits me".
        (
            rf"{_SPEAKER}\b(?:[Oo]ur|[Mm]y)\s+(?:neighbou?rhood|apartment|flat|house|street)\s+"
            rf"in\s+{_OBJ}",
            "lives_in",
            "place",
            False,
            False,
            0.7,
            ("neighbo", "apartment", "flat", "house", "street"),
        ),
        (
            rf"{_SPEAKER}\b[Ll]ife\s+in\s+{_OBJ}\s+(?:suits|agrees\s+with)\s+me\b",
            "lives_in",
            "place",
            False,
            False,
            0.7,
            ("life",),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:moved|relocated)\s+(?:back\s+)?(?:to|into)\s+{_OBJ}",
            "lives_in",
            "place",
            True,
            False,
            0.9,
            ("moved", "relocated"),
        ),
        (
            rf"{_SUBJ}\s+used\s+to\s+work{_ROLE}{_AT}{_OBJ}",
            "works_at",
            "org",
            False,
            True,
            0.85,
            ("used",),
        ),
        (
            rf"{_SUBJ}\s+(?:quit|left)\s+(?:my|his|her|their|our)\s+(?:job|position|role)\s+"
            rf"(?:at|with)\s+(?:the\s+)?{_OBJ}",
            "works_at",
            "org",
            False,
            True,
            0.85,
            ("quit", "left"),
        ),
        (rf"{_SUBJ}\s+worked{_ROLE}{_AT}{_OBJ}", "works_at", "org", False, True, 0.75, ("worked",)),
        (
            rf"{_SUBJ}{_BE}{_HAVE}{_ADV}\s+(?:been\s+)?(?:work|works|working|worked){_ROLE}{_AT}"
            rf"{_OBJ}",
            "works_at",
            "org",
            False,
            False,
            0.9,
            ("work",),
        ),
        # The speaker's role or shift at a workplace: "being a nurse at St. Mary's is
        # exhausting", "my shift at Cafe Amara ran late".
        (
            rf"{_SPEAKER}\b(?:[Bb]eing|I'm|I\s+am){_ADV}\s+(?:a|an)\s+[a-z][a-z\-]*"
            rf"(?:\s+[a-z][a-z\-]*){{0,2}}?{_AT}{_OBJ}",
            "works_at",
            "org",
            False,
            False,
            0.75,
            ("being", "i'm", "am"),
        ),
        (
            rf"{_SPEAKER}\b[Mm]y\s+(?:shifts?|job|office|workplace)\s+at\s+(?:the\s+)?{_OBJ}",
            "works_at",
            "org",
            False,
            False,
            0.75,
            ("shift", "job", "office", "workplace"),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:got|started|landed|accepted|took)\s+(?:a\s+|an\s+|my\s+"
            rf"|the\s+)?(?:new\s+)?(?:job|position|role|internship){_ROLE}\s+(?:at|with)\s+"
            rf"(?:the\s+)?{_OBJ}",
            "works_at",
            "org",
            True,
            False,
            0.9,
            ("job", "position", "role", "internship"),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:joined|started\s+at)\s+{_OBJ}",
            "works_at",
            "org",
            True,
            False,
            0.7,
            ("joined", "started"),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+adopted\s+(?:a|an|another|two|three)?\s*(?:[a-z]+\s+){{0,2}}?"
            rf"(?:named|called)\s+{_OBJ}",
            "adopted",
            "thing",
            True,
            False,
            0.9,
            ("adopted",),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+adopted\s+{_OBJ}",
            "adopted",
            "thing",
            True,
            False,
            0.85,
            ("adopted",),
        ),
        # A pet that joined without "adopted": "say hello to Luna, our new tabby cat",
        # "we brought home a tabby cat called Clementine", "we got a pet, a corgi named Archie".
        (
            rf"{_SPEAKER}{_OBJ},\s+(?:our|my)\s+new\s+(?:[a-z\-]+\s+){{0,2}}?(?:{_PET_WORDS})s?\b",
            "adopted",
            "thing",
            True,
            False,
            0.75,
            ("new",),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:got|brought\s+home|added|welcomed)\s+(?:a|an|another)\s+"
            rf"(?:[a-z\-]+\s+){{0,3}}?(?:{_PET_WORDS})s?\b[^.!?]{{0,40}}?\b(?:named|called)\s+{_OBJ}",
            "adopted",
            "thing",
            True,
            False,
            0.8,
            ("named", "called"),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+adopted\s+(?:a|an)\s+{_NOUN}",
            "adopted",
            "thing",
            True,
            False,
            0.8,
            ("adopted",),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:own|owns|bought|purchased)\s+(?:a|an|my|the|our)\s+"
            rf"(?:new\s+|first\s+|used\s+)?{_NOUN}",
            "owns",
            "thing",
            False,
            False,
            0.75,
            ("own", "bought", "purchased"),
        ),
        # Where someone comes from: "I grew up in Savannah", "I'm from Ithaca
        # originally", "back in Duluth, where I was raised", "my hometown, Galway".
        (
            rf"{_SUBJ}{_ADV}\s+grew\s+up\s+in\s+{_OBJ}",
            "grew_up_in",
            "place",
            False,
            False,
            0.9,
            ("grew",),
        ),
        (
            rf"{_SUBJ}{_BE}\s+(?:born\s+and\s+)?raised\s+in\s+{_OBJ}",
            "grew_up_in",
            "place",
            False,
            False,
            0.9,
            ("raised",),
        ),
        (
            rf"{_SUBJ}(?:'m|'re|'s|\s+am|\s+is|\s+are)\s+(?:originally\s+)?from\s+{_OBJ}",
            "grew_up_in",
            "place",
            False,
            False,
            0.8,
            ("from",),
        ),
        (
            rf"{_SPEAKER}{_OBJ},?\s+where\s+I\s+(?:was\s+(?:born\s+and\s+)?raised|grew\s+up)\b",
            "grew_up_in",
            "place",
            False,
            False,
            0.85,
            ("where",),
        ),
        (
            rf"{_SPEAKER}\b[Mm]y\s+hometown,?\s+{_OBJ}",
            "grew_up_in",
            "place",
            False,
            False,
            0.85,
            ("hometown",),
        ),
        # What the speaker does for pleasure: "street photography is my hobby", "rock
        # climbing has become my thing", "trail running is how I unwind", "I've really
        # gotten into pottery".
        (
            rf"{_SPEAKER}(?:^|(?<=[.!?]\s))(?:[Mm]y\s+)?(?P<noun>[A-Za-z][a-z\-]+(?:\s+[a-z][a-z\-]+)?)"
            rf"\s+(?:is|has\s+become|became)\s+(?:my\s+(?:hobby|thing|passion|happy\s+place)"
            rf"|how\s+I\s+(?:unwind|relax))\b",
            "enjoys",
            "thing",
            False,
            False,
            0.75,
            ("hobby", "thing", "passion", "happy", "unwind", "relax"),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}(?:\s+really)?\s+(?:gotten|got)\s+into\s+{_NOUN}",
            "enjoys",
            "thing",
            False,
            False,
            0.75,
            ("into",),
        ),
        # Places someone travelled to: "I just got back from Hanoi", "the trip to
        # Marrakech was ...", "we spent ten days in Crete", "traveling around the Highlands".
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:got|came)\s+back\s+from\s+(?:the\s+)?{_OBJ}",
            "visited",
            "place",
            True,
            False,
            0.8,
            ("back",),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:visited|toured|travell?ed\s+to|flew\s+to)\s+(?:the\s+)?"
            rf"{_OBJ}",
            "visited",
            "place",
            True,
            False,
            0.85,
            ("visited", "toured", "travel", "flew"),
        ),
        (
            rf"{_SUBJ}\s+spent\s+(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+|a\s+few"
            rf"|several)\s+(?:days|weeks|nights|months)\s+in\s+(?:the\s+)?{_OBJ}",
            "visited",
            "place",
            True,
            False,
            0.8,
            ("spent",),
        ),
        (
            rf"{_SPEAKER}\b(?:[Tt]he|[Oo]ur|[Mm]y)\s+trip\s+to\s+(?:the\s+)?{_OBJ}",
            "visited",
            "place",
            True,
            False,
            0.7,
            ("trip",),
        ),
        (
            rf"{_SPEAKER}\b[Tt]ravell?ing\s+(?:around|through|across)\s+(?:the\s+)?{_OBJ}",
            "visited",
            "place",
            True,
            False,
            0.7,
            ("travel",),
        ),
        (
            rf"{_SUBJ}{_BE}{_HAVE}{_ADV}\s+(?:got\s+|been\s+)?married\s+(?:to\s+)?{_OBJ}",
            "married_to",
            "person",
            True,
            False,
            0.9,
            ("married",),
        ),
        (
            rf"{_SUBJ}{_HAVE}{_ADV}\s+(?:got\s+)?divorced(?:\s+from)?\s+{_OBJ}",
            "married_to",
            "person",
            False,
            True,
            0.85,
            ("divorced",),
        ),
    )
)
_MY_KIN = re.compile(rf"\b[Mm]y\s+{_MODS}(?P<kin>{_KIN_WORDS})\s*,?\s+{_OBJ}")
_IS_MY_KIN = re.compile(rf"{_OBJ}\s+is\s+my\s+{_MODS}(?P<kin>{_KIN_WORDS})\b")
_IS_THEIR_KIN = re.compile(
    rf"{_OBJ}\s+is\s+(?P<other>{NAME})['\u2019]s\s+{_MODS}"
    rf"(?P<kin>{_KIN_WORDS})\b"
)
# Every kin match holds one of its (lower-case) kin words: the gate of the three scans.
_KIN_NEEDS = tuple(_KIN)
_PET_NOUNS = frozenset(PETS)
# Words that start no thing someone enjoys ("this is my thing", "the weather is ...").
_NOT_THINGS_TEXT = """this that it what which there here the a an everything nothing
something work life"""
_NOT_THINGS = frozenset(_NOT_THINGS_TEXT.split())
# Words that end a noun object ("a car yesterday", "a house in Lisbon").
_NOT_NOUNS_TEXT = """yesterday today tonight tomorrow last this next and in at for from
with to on of by when while after before since that which who because but so recently"""
_NOT_NOUNS = frozenset(_NOT_NOUNS_TEXT.split())


def read_relations(sentence: str) -> list[Reading]:
    """Every typed relation ``sentence`` states, in rule order, once per (type, object)."""
    out: list[Reading] = []
    taken: list[tuple[int, int]] = []  # spans already read: the first rule that fits wins
    lowered = sentence.lower()  # only ever tested for ASCII words (see ``needs``)
    for pattern, rtype, otype, starts, ended, conf, needs in _RULES:
        for word in needs:  # a loop, not any(): no generator per rule and sentence
            if word in lowered:
                break
        else:
            continue
        for m in pattern.finditer(sentence):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            groups = m.groupdict()
            obj = groups.get("obj") or groups.get("noun") or ""
            if groups.get("noun"):
                nouns = obj.split()
                if nouns[0] in _NOT_OWNED or nouns[0].lower() in _NOT_THINGS:
                    continue
                if len(nouns) > 1 and (nouns[1] in _NOT_NOUNS or nouns[1] in _PET_NOUNS):
                    nouns = nouns[:1] if nouns[1] in _NOT_NOUNS else nouns[1:]
                obj = " ".join(nouns)
            subject = m.group("subj") or "I"
            if subject in ("We", "we"):
                subject, conf = "I", conf - 0.1
            taken.append((m.start(), m.end()))
            out.append(Reading(subject, rtype, obj.strip(), otype, conf, starts, ended))
    if any(word in lowered for word in _KIN_NEEDS):
        for pattern in (_MY_KIN, _IS_MY_KIN):
            for m in pattern.finditer(sentence):
                out.append(_kin(m.group("obj"), m.group("kin").lower(), "I"))
        for m in _IS_THEIR_KIN.finditer(sentence):
            out.append(_kin(m.group("obj"), m.group("kin").lower(), m.group("other")))
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for r in out:
        if (r.subject, r.type, r.obj) not in seen:
            seen.add((r.subject, r.type, r.obj))
            unique.append(r)
    return unique


def _kin(name: str, kin: str, other: str) -> Reading:
    """ "my sister Anna": Anna sister_of the speaker; "my wife Kate": speaker married_to Kate."""
    rtype = _KIN[kin]
    if rtype in ("married_to", "partner_of"):
        return Reading(other, rtype, name, "person", 0.85, False, False)
    return Reading(name, rtype, other, "person", 0.85, False, False)
