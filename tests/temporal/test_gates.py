"""The scan gates of mnemoray.temporal.expressions change no result: every text, gated or
not, resolves to the same spans (and raises the same errors)."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from mnemoray.temporal import expressions, resolve_times
from tests.support.text_variants import variant

EXPRESSIONS = (
    "May 7, 2023",
    "7th of May 2023",
    "2023-05-07",
    "2023/5/7",
    "in March",
    "last May",
    "next June",
    "this October",
    "mid July",
    "during August",
    "until  \t May",
    "past Sunday",
    "this\n\nFriday",
    "since Dec 2020",
    "since 2019",
    "in 2021",
    "the year 2020",
    "back in the 90s",
    "the '80s",
    "1990s",
    "the 2010s",
    "the 1980's",
    "yesterday",
    "today",
    "tonight",
    "tomorrow",
    "last night",
    "this morning",
    "this evening",
    "the day before yesterday",
    "the day after tomorrow",
    "two weeks ago",
    "a couple of months ago",
    "3 years ago",
    "a few days ago",
    "several weeks ago",
    "last week",
    "this weekend",
    "next month",
    "the past year",
    "the past weekend",
    "earlier this month",
    "later this year",
    "last Saturday",
    "on Monday",
    "next Friday",
    "Sundays",
    "this summer",
    "last winter",
    "the summer of 2021",
    "in the fall",
    "autumn 2019",
    "the week before",
    "the month after",
    "the day after",
    "Sept. 3",
    "Dec 25th",
    "February 30",
    "June 31, 2022",
    "recently",
    "a while ago",
    "Monday",
    "May",
    "spring",
    "Jan 2024",
    "12 March",
    "3rd of Aug",
)
FILLERS = (
    "We went hiking",
    "Caroline said",
    "and then",
    "the café",
    "🙂",
    "\n",
    ",",
    ".",
    "my",
    "I fall asleep",
    "summer camp",
    "every day",
    "in Paris",
    "about 20 euros",
    "was it",
    "Mayday",
    "dayly",
    "agora",
    "the market",
    "afternoons",
    "nights",
    "weekly",
    "-",
)


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = [*EXPRESSIONS, *(variant(e, rng) for e in EXPRESSIONS for _ in range(3))]
    for _ in range(n):
        parts = [
            rng.choice(FILLERS) if rng.random() < 0.5 else rng.choice(EXPRESSIONS)
            for _ in range(rng.randint(1, 6))
        ]
        text = " ".join(variant(p, rng) if rng.random() < 0.3 else p for p in parts)
        out.append(text)
    return out


REFERENCES: tuple[Any, ...] = (
    "2023-05-08",
    "2020-02-29",
    "1999-12-31",
    "2024-01-01",
    1_704_067_200.0,
    1_650_000_000.5,
)


def _outcome(text: str, reference: Any) -> Any:
    try:
        return resolve_times(text, reference)
    except Exception as exc:  # the same error, gated or not
        return type(exc).__name__, str(exc)


def test_gated_and_ungated_scans_resolve_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = corpus(3000, seed=15)
    refs = [REFERENCES[i % len(REFERENCES)] for i in range(len(texts))]
    gated = [_outcome(t, r) for t, r in zip(texts, refs, strict=True)]
    # Every gate word present in every text: every gate open, every pattern scanned.
    every = {w for _, _, first, second in expressions._SCANS for w in (*first, *(second or ()))}
    every |= set(expressions._ANCHORED_NEEDS[0])
    monkeypatch.setattr(expressions, "_present", lambda *_: every)
    ungated = [_outcome(t, r) for t, r in zip(texts, refs, strict=True)]
    assert gated == ungated
    assert not [g for g in gated if isinstance(g, tuple)]  # no text makes it raise
    # The corpus exercises the gates both ways: most texts name a time, some do not.
    assert sum(bool(g) for g in gated) > len(texts) // 2
    assert sum(g == [] for g in gated) > 100


def test_every_pattern_matches_somewhere_in_the_corpus() -> None:
    """A gate is only checked where its pattern matches: each one must, in the corpus."""
    texts = corpus(3000, seed=15)
    for pattern, handler, _ in expressions._PATTERNS:
        assert any(pattern.search(t) for t in texts), handler.__name__
    assert any(expressions._ANCHORED.search(t) for t in texts)


def test_fold_table_lists_every_non_ascii_letter_re_folds_onto_ascii() -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"
    one = re.compile("(?i:" + "|".join(letters) + ")")
    found = {}
    for code in range(128, 0x110000):
        ch = chr(code)
        if one.fullmatch(ch):
            found[code] = next(a for a in letters if re.fullmatch(f"(?i:{a})", ch))
    assert found == expressions._FOLD


@pytest.mark.parametrize(
    ("hostile", "plain"),
    [
        ("th\u0130s morn\u0130ng", "this morning"),
        ("\u017fummer of 2021", "summer of 2021"),
        ("la\u017ft wee\u212a", "last week"),
        ("next fr\u0131day", "next friday"),
        ("\u017feveral days ago", "several days ago"),
        ("the wee\u212a before", "the week before"),
    ],
)
def test_letters_re_folds_onto_ascii_read_as_those_letters(hostile: str, plain: str) -> None:
    """A word the patterns match case-insensitively names the time the ASCII word does
    (it used to raise KeyError, failing the whole recall that read it)."""
    got = [(s.start, s.end, s.granularity) for s in resolve_times(hostile, "2023-05-08")]
    assert got == [(s.start, s.end, s.granularity) for s in resolve_times(plain, "2023-05-08")]
    assert got
