"""The word gates of mnemoray.graph.patterns change no reading: every sentence, gated or
not, reads to the same relations, in the same order."""

from __future__ import annotations

import random

import pytest

from benchmarks.datagen import DatasetConfig, generate
from benchmarks.longconv_data import LongConvConfig
from benchmarks.longconv_data import generate as generate_longconv
from mnemoray.graph import patterns
from mnemoray.graph.patterns import read_relations
from tests.support.text_variants import variant

# One or more sentences per rule, and near misses.
SENTENCES = (
    "I used to live in Boston.",
    "We once lived in Oslo.",
    "My sister has been living in Porto.",
    "I reside in Lyon now.",
    "Anna is based in Berlin.",
    "They settled in Quebec City.",
    "I love living in Kyoto.",
    "Our neighbourhood in Toronto is quiet.",
    "My flat in Leeds.",
    "Life in Denver suits me.",
    "We just moved to Lisbon.",
    "I relocated back to Cork.",
    "I used to work as a nurse at St. Mary's.",
    "I quit my job at Acme Corp.",
    "She left her position with the Daily Post.",
    "I worked for Globex.",
    "I've been working as a social worker at the Harbor Youth Center.",
    "Being a nurse at St. Mary's is exhausting.",
    "I'm a barista at Cafe Amara.",
    "I am the new lead at Initech.",
    "My shift at Cafe Amara ran late.",
    "I finally landed a new job at Pixar.",
    "Tom accepted the internship with NASA.",
    "We joined Hooli last year.",
    "I started at Umbrella in May.",
    "We adopted a puppy named Biscuit.",
    "I adopted Mochi.",
    "We adopted an old greyhound.",
    "Say hello to Luna, our new tabby cat!",
    "We brought home a beagle called Olive.",
    "I just got a rescue dog called Pepper.",
    "I own a red bike.",
    "We bought a used car.",
    "I purchased a house yesterday.",
    "I grew up in Savannah.",
    "I was born and raised in Cork.",
    "I'm from Ithaca originally.",
    "Back in Duluth, where I was raised, winters were hard.",
    "My hometown, Galway, is lovely.",
    "Street photography is my hobby.",
    "Rock climbing has become my thing.",
    "Trail running is how I unwind.",
    "I've really gotten into pottery.",
    "I just got back from Hanoi!",
    "We visited the Alps.",
    "I travelled to Peru.",
    "She flew to Tokyo.",
    "I toured Vienna.",
    "We spent ten days in Crete.",
    "The trip to Marrakech was the best.",
    "Travelling around the Highlands was magic.",
    "I got married to Kate.",
    "We got divorced from each other.",
    "I divorced Sam.",
    "My little sister Anna is visiting.",
    "Kate is my wife.",
    "Mia is Tom's daughter.",
    "Mia is Tom\u2019s best friend.",
    "My best friend, Joe, called.",
    "Coffee from Ethiopia is great.",
    "This is my thing.",
    "I got back from work late.",
    "Being a parent at times is hard.",
    "Nothing to report.",
    "",
    " ",
    "I",
    "MY SISTER ANNA",
    "Lived in.",
    "we moved to paris",
)


def corpus() -> list[str]:
    rng = random.Random(7)
    out = [*SENTENCES, *(variant(s, rng) for s in SENTENCES for _ in range(4))]
    data = generate(DatasetConfig(users=12, sessions_per_user=6))
    out += [e.text for s in data.sessions for e in s.events if e.text]
    long = generate_longconv(LongConvConfig(pairs=2, sessions=6))
    out += [e.text for s in long.sessions for e in s.events if e.text]
    for _ in range(300):  # sentences stitched from pieces of others
        a, b = rng.sample(SENTENCES, 2)
        out.append(a[: rng.randrange(len(a) + 1)] + " " + b[rng.randrange(len(b) + 1) :])
    return out


def _readings(sentences: list[str]) -> list[list[patterns.Reading]]:
    return [read_relations(s) for s in sentences]


def test_gated_reading_equals_the_ungated_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    sentences = corpus()
    gated = _readings(sentences)
    # An empty word is in every sentence: each rule scans, as before the gates.
    monkeypatch.setattr(patterns, "_RULES", tuple((*r[:6], ("",)) for r in patterns._RULES))
    monkeypatch.setattr(patterns, "_KIN_NEEDS", ("",))
    ungated = _readings(sentences)
    assert gated == ungated
    found = sum(1 for r in gated if r)
    assert found >= 80, found  # the corpus does state relations: the check compares something
    assert {r.type for rs in gated for r in rs} >= {
        "lives_in",
        "works_at",
        "adopted",
        "owns",
        "grew_up_in",
        "enjoys",
        "visited",
        "married_to",
        "sister_of",
        "friend_of",
    }


def test_every_rule_names_what_it_needs() -> None:
    for rule in patterns._RULES:
        needs = rule[6]
        assert needs and all(w and w == w.lower() and w.isascii() for w in needs), rule[1]
