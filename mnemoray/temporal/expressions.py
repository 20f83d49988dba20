"""Time expressions in text, resolved against a reference date (docs/graph.md, "Time").

    resolve_times("We moved to Paris last May", reference="2023-06-12")
    # [TimeSpan(start=1651363200, end=1654041600, text='last May', label='2022-05', ...)]

A span is a half-open interval ``[start, end)`` of epoch seconds (UTC days), the
characters it was read from and a label (``2023-05-07``, ``2023-W18``, ``2023-05``,
``2023-summer``, ``2023``, ``1990s``) that names the same period wherever it is said.
Relative expressions ("yesterday", "last Saturday", "two months ago", "the week
before") are resolved against the reference (the session's date); vague ones
("recently", "a while ago") resolve to nothing. A date that names no year (and "on
Saturday", "in the summer") follows the tense of its clause: "I started in June" is the
last June, "we will fly out in June" the next (``mnemoray.temporal.tense``); a clause
that says neither takes the year nearest the reference, the past preferred
(conversations recount more than they plan). Deterministic and stdlib only: the same
text and reference give the same spans.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from mnemoray.temporal.periods import (
    Period,
    day,
    epoch,
    month,
    nearest_year,
    season,
    shift,
    to_date,
    unit_of,
    year,
)
from mnemoray.temporal.tense import Lean, lean_at

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Month and weekday names, full and in the short forms that are no one's name ("Jan",
#: "Sun" can be), lower case: dates, never names of people or places (entity extraction
#: leaves them out).
CALENDAR_WORDS = frozenset(
    {
        *_WEEKDAYS,
        *("tues", "wed", "thurs", "fri", "sat"),
        *("january", "february", "march", "april", "may", "june", "july", "august"),
        *("september", "october", "november", "december"),
        *("feb", "apr", "aug", "sep", "sept", "oct", "nov", "dec"),
    }
)
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
    "a couple": 2,
}
_VAGUE_COUNTS = {"a few": (2, 4), "few": (2, 4), "several": (2, 5)}

# Month names are matched capitalised only ("may" is also a verb).
_MONTH = (
    r"(?P<mon>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?"
    r"|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\b\.?"
)
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = (
    r"(?P<n>\d{1,2}|a couple(?: of)?|couple of|a few|few|several|an?|one|two|three|four"
    r"|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WDAY = r"(?P<wday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(?P<season>spring|summer|autumn|winter|fall)"


@dataclass(frozen=True)
class TimeSpan:
    """A resolved time expression: ``[start, end)`` in epoch seconds, what was read
    (``text`` at ``begin:end_char``), its ``granularity`` and canonical ``label``."""

    start: int
    end: int
    text: str
    begin: int
    end_char: int
    granularity: str  # day, weekend, week, month, season, year, decade, range
    label: str
    relative: bool  # resolved against the reference date

    def contains(self, ts: float) -> bool:
        return self.start <= ts < self.end

    def overlaps(self, start: float, end: float) -> bool:
        return self.start < end and start < self.end


# -- handlers: (match, reference, anchor) -> period or None ----------------------------
def _mon(m: re.Match[str]) -> int:
    return _MONTHS[m.group("mon")[:3].lower()]


def _count(raw: str) -> tuple[int, int]:
    raw = _folded(raw)
    if raw.isdigit():
        return int(raw), int(raw)
    if raw in _VAGUE_COUNTS:
        return _VAGUE_COUNTS[raw]
    return _NUMBERS[raw], _NUMBERS[raw]


def _h_date(m: re.Match[str], ref: date) -> Period | None:
    mon, dom = _mon(m) if m.group("mon") else int(m.group("m")), int(m.group("day"))
    try:
        if m.group("year"):
            return day(date(int(m.group("year")), mon, dom))
        return nearest_year(ref, lambda y: day(date(y, mon, dom)), _lean(m))
    except ValueError:  # "February 30"
        return None


def _h_month(m: re.Match[str], ref: date) -> Period | None:
    mon, qual = _mon(m), _folded(m.group("q") or "")
    if not qual and not m.group("year"):
        return None  # a bare "May" may be a verb or a name
    if m.group("year"):
        return month(int(m.group("year")), mon)
    if qual == "last":
        y = ref.year if mon < ref.month else ref.year - 1
    elif qual == "next":
        y = ref.year if mon > ref.month else ref.year + 1
    elif qual == "this":
        y = ref.year
    else:  # "since March" began before it was said
        lean = "past" if qual == "since" else _lean(m)
        return nearest_year(ref, lambda yy: month(yy, mon), lean)
    return month(y, mon)


def _lean(m: re.Match[str]) -> Lean:
    """The way the clause around the match leans in time (``mnemoray.temporal.tense``)."""
    return lean_at(m.string, m.start(), m.end())


def _h_year(m: re.Match[str], ref: date) -> Period:
    return year(int(m.group("year")))


def _h_decade(m: re.Match[str], ref: date) -> Period:
    century = m.group("cent") or ("20" if int(m.group("dec")) < 30 else "19")
    y = int(century + m.group("dec"))
    return date(y, 1, 1), date(y + 10, 1, 1), "decade", f"{y}s"


def _h_named_day(m: re.Match[str], ref: date) -> Period:
    word = " ".join(_folded(m.group(0)).split())
    offsets = {
        "today": 0,
        "tonight": 0,
        "this morning": 0,
        "this afternoon": 0,
        "this evening": 0,
        "yesterday": -1,
        "last night": -1,
        "tomorrow": 1,
        "the day before yesterday": -2,
        "the day after tomorrow": 2,
    }
    return day(ref + timedelta(days=offsets[word]))


def _h_ago(m: re.Match[str], ref: date) -> Period:
    low, high = _count(m.group("n"))
    unit = _folded(m.group("unit"))
    first = unit_of(unit, shift(ref, unit, -high))
    last = unit_of(unit, shift(ref, unit, -low))
    if low == high:
        return first
    return first[0], last[1], "range", f"{first[0].isoformat()}..{last[1].isoformat()}"


def _h_relative(m: re.Match[str], ref: date) -> Period:
    qual, unit = _folded(m.group("q")), _folded(m.group("unit"))
    if qual == "past":  # "the past week": the days just before the reference
        days = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}[unit]
        start = ref - timedelta(days=days)
        end = ref + timedelta(days=1)
        return start, end, "range", f"{start.isoformat()}..{end.isoformat()}"
    step = {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[qual]
    return unit_of(unit, shift(ref, unit, step))


def _h_part(m: re.Match[str], ref: date) -> Period:
    """ "earlier this month", "later this year": the part before or after the reference."""
    first, after, _, label = unit_of(_folded(m.group("unit")), ref)
    if _folded(m.group("side")) == "earlier":
        return first, ref + timedelta(days=1), "range", f"{first.isoformat()}..{ref.isoformat()}"
    return ref, after, "range", f"{ref.isoformat()}..{after.isoformat()}"


def _h_weekday(m: re.Match[str], ref: date) -> Period:
    target = _WEEKDAYS.index(_folded(m.group("wday")))
    qual = _folded(m.group("q") or "")
    if qual == "next":
        return day(ref + timedelta(days=(target - ref.weekday() - 1) % 7 + 1))
    if qual == "this":
        return day(ref - timedelta(days=ref.weekday()) + timedelta(days=target))
    if qual not in ("last", "past") and _lean(m) == "future":  # "we're flying out on Saturday"
        return day(ref + timedelta(days=(target - ref.weekday() - 1) % 7 + 1))
    # "last Saturday", "on Saturday", "Saturday": the most recent one before the reference.
    return day(ref - timedelta(days=(ref.weekday() - target - 1) % 7 + 1))


def _h_season(m: re.Match[str], ref: date) -> Period | None:
    name, qual = _folded(m.group("season")), _folded(m.group("q") or "").strip()
    if not qual and not m.group("year"):
        return None  # "summer camp", "I fall"
    if m.group("year"):
        return season(int(m.group("year")), name)
    # Winter of year Y starts in December Y: the one in progress in January started earlier.
    here = ref.year - 1 if name == "winter" and ref.month < 3 else ref.year
    current = season(here, name)
    if qual in ("last", "past", "previous"):
        return current if current[1] <= ref else season(here - 1, name)
    if qual in ("next", "coming"):
        return current if current[0] > ref else season(here + 1, name)
    if qual == "this":
        return current
    if _lean(m) == "future":  # "we will go hiking in the summer": the one not yet over
        return current if current[1] > ref else season(here + 1, name)
    return current if current[0] <= ref else season(here - 1, name)


_Handler = Callable[[re.Match[str], date], "Period | None"]
_I = "(?i:"
# What a pattern cannot match without (a gate, tested before the scan): words any one of
# which its match contains, as written (month names are matched capitalised only) and in
# the folded text (see _folded). Scanning is most of what resolving costs, and most texts
# name no time, or only some kinds of time: a gate that fails skips its pattern's scan.
# Each gate is a word every match of its pattern contains, so skipping changes nothing
# (tests/temporal/test_gates.py checks it against the ungated scan).
_Gate = tuple[tuple[str, ...], tuple[str, ...]]
_ANY: tuple[str, ...] = ()
_MONTH_WORDS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DIGIT = ("<digit>",)  # a Unicode decimal digit (what \d matches), tested by regex
_PATTERNS: tuple[tuple[re.Pattern[str], _Handler, _Gate], ...] = tuple(
    (re.compile(p), h, g)
    for p, h, g in (
        (rf"\b{_YEAR}[-/](?P<m>[01]?\d)[-/](?P<day>[0-3]?\d)\b(?P<mon>)?", _h_date, (_ANY, _DIGIT)),
        (rf"\b{_MONTH}\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?", _h_date, (_MONTH_WORDS, _DIGIT)),
        (
            rf"\b{_DAY}\s+(?:{_I}of)\s+)?{_MONTH}(?:,?\s+{_YEAR}\b)?",
            _h_date,
            (_MONTH_WORDS, _DIGIT),
        ),
        (
            rf"(?:\b{_I}(?P<q>last|next|this|in|since|until|during|by|early|mid|late)\s+))?"
            rf"\b{_MONTH}(?:,?\s+(?:{_I}of)\s+)?{_YEAR}\b)?",
            _h_month,
            (_MONTH_WORDS, _ANY),
        ),
        (
            rf"\b{_I}in|since|during|until|by|from|of|around|back in|early|mid|late|the year)"
            rf"[\s-]+{_YEAR}\b",
            _h_year,
            (_ANY, _DIGIT),
        ),
        (r"(?:\b|')(?P<cent>19|20)?(?P<dec>\d0)'?s\b", _h_decade, (_ANY, ("0s", "0's"))),
        (
            rf"\b{_I}the day (?:before yesterday|after tomorrow)|yesterday|today|tonight"
            r"|tomorrow|last night|this (?:morning|afternoon|evening))\b",
            _h_named_day,
            (
                _ANY,
                (
                    "yesterday",
                    "today",
                    "tonight",
                    "tomorrow",
                    "night",
                    "morning",
                    "afternoon",
                    "evening",
                ),
            ),
        ),
        (rf"\b{_I}{_COUNT}\s+{_UNIT}\s+ago)\b", _h_ago, (_ANY, ("ago",))),
        (
            rf"\b{_I}(?P<q>last|this|next|past|previous|coming)\s+"
            r"(?P<unit>weekend|week|month|year))\b",
            _h_relative,
            (_ANY, ("week", "month", "year")),
        ),
        (
            rf"\b{_I}(?P<side>earlier|later)\s+this\s+(?P<unit>week|month|year))\b",
            _h_part,
            (_ANY, ("week", "month", "year")),
        ),
        (
            rf"\b{_I}(?:(?P<q>last|this|next|on|past)\s+)?{_WDAY})\b(?!s)",
            _h_weekday,
            (_ANY, _WEEKDAYS),
        ),
        (
            rf"\b{_I}(?:(?P<q>last|this|next|past|previous|coming|in the|in|during the|over the)"
            rf"\s+)?{_SEASON}(?:\s+(?:of\s+)?{_YEAR})?)\b",
            _h_season,
            (_ANY, ("spring", "summer", "autumn", "winter", "fall")),
        ),
    )
)
# Resolved against another span (the one right after, else the one before, else the
# reference): "the week before May 7, 2023", "went to Rome in June and the week before...".
_ANCHORED = re.compile(
    r"\b(?i:the\s+(?P<unit>day|week|weekend|month|year)\s+"
    r"(?P<dir>before|after))\b"
)
_VAGUE = re.compile(
    r"\b(?i:recently|lately|a while (?:ago|back)|some time ago|long ago"
    r"|the other day|back then|these days|nowadays)\b"
)
_ANCHORED_GATE: _Gate = (_ANY, ("before", "after"))
_ANY_DIGIT = re.compile(r"\d")
# The only characters outside ASCII that a case-insensitive ASCII letter matches in
# Python's re (found by trying every code point; the gates test pins it), mapped to it
# before lower-casing so that a gate word is found wherever its pattern could match.
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
# Each gate as the word sets a text must meet (one word of each: the first always, the
# second where there is one); the words any gate names, looked for once per text.
_Needs = tuple[frozenset[str], frozenset[str] | None]


def _needs(gate: _Gate) -> _Needs:
    groups = [frozenset(g) for g in gate if g]
    return groups[0], groups[1] if len(groups) > 1 else None


_SCANS = tuple((pattern, handler, *_needs(gate)) for pattern, handler, gate in _PATTERNS)
_ANCHORED_NEEDS = _needs(_ANCHORED_GATE)
_CASED_WORDS = tuple(sorted({w for _, _, (cased, _) in _PATTERNS for w in cased}))
_FOLDED_WORDS = tuple(
    sorted(
        {
            w
            for _, _, (_, words) in (*_PATTERNS, (None, None, _ANCHORED_GATE))
            for w in words
            if words is not _DIGIT
        }
    )
)


def _folded(text: str) -> str:
    """``text`` lower-cased as re's case-insensitive matching folds it: a word a pattern
    matched ("thıs", "ſummer") reads as the ASCII word it matched as."""
    return text.lower() if text.isascii() else text.translate(_FOLD).lower()


def _present(text: str) -> set[str]:
    """The gate words ``text`` holds (``<digit>`` for any digit)."""
    folded = _folded(text)
    found = {w for w in _FOLDED_WORDS if w in folded}
    found.update(w for w in _CASED_WORDS if w in text)
    if _ANY_DIGIT.search(text) is not None:
        found.add(_DIGIT[0])
    return found


def resolve_times(text: str, reference: Any) -> list[TimeSpan]:
    """Every time expression in ``text`` resolved against ``reference`` (the session's
    date), in text order; overlapping readings keep the longest."""
    ref = to_date(reference)
    present = _present(text)
    found: list[tuple[int, int, Period, bool]] = []
    for pattern, handler, first, second in _SCANS:
        if first.isdisjoint(present) or (second is not None and second.isdisjoint(present)):
            continue
        for m in pattern.finditer(text):
            period = handler(m, ref)
            if period is not None:
                absolute = handler in (_h_year, _h_decade) or bool(
                    "year" in pattern.groupindex and m.group("year")
                )
                found.append((m.start(), m.end(), period, not absolute))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    kept: list[tuple[int, int, Period, bool]] = []
    for f in found:
        if not kept or f[0] >= kept[-1][1]:
            kept.append(f)
    spans = [_span(text, *f) for f in kept]
    anchored = () if _ANCHORED_NEEDS[0].isdisjoint(present) else _ANCHORED.finditer(text)
    for m in anchored:
        if any(s.begin < m.end() and m.start() < s.end_char for s in spans):
            continue
        after = [s for s in spans if s.begin >= m.end() and not text[m.end() : s.begin].strip()]
        before = [s for s in spans if s.end_char <= m.start()]
        anchor = to_date(after[0].start) if after else to_date(before[-1].start) if before else ref
        unit, step = _folded(m.group("unit")), -1 if _folded(m.group("dir")) == "before" else 1
        period = unit_of(unit, shift(anchor, unit, step))
        spans.append(_span(text, m.start(), m.end(), period, True))
    return sorted(spans, key=lambda s: s.begin)


def _span(text: str, begin: int, end: int, period: Period, relative: bool) -> TimeSpan:
    first, after, granularity, label = period
    return TimeSpan(
        epoch(first), epoch(after), text[begin:end], begin, end, granularity, label, relative
    )


def is_vague(text: str) -> bool:
    """Whether ``text`` speaks of a time it does not say ("recently", "a while ago")."""
    return bool(_VAGUE.search(text))
