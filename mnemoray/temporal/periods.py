"""Calendar periods as (first day, day after the last, granularity, label), UTC days."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

from mnemoray.errors import InvalidInput

_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def epoch(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=timezone.utc).timestamp())


def to_date(reference: Any) -> date:
    """A reference date from epoch seconds, an ISO string, a ``date`` or ``datetime``."""
    if isinstance(reference, datetime):
        dt = reference if reference.tzinfo else reference.replace(tzinfo=timezone.utc)
        return dt.astimezone(timezone.utc).date()
    if isinstance(reference, date):
        return reference
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        return datetime.fromtimestamp(float(reference), tz=timezone.utc).date()
    if isinstance(reference, str):
        try:
            return to_date(datetime.fromisoformat(reference.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise InvalidInput(
        f"expected a date, datetime, ISO-8601 string or epoch seconds, got {reference!r:.60}",
        field="reference",
    )


Period = tuple[date, date, str, str]


def add_months(d: date, n: int) -> date:
    k = d.year * 12 + d.month - 1 + n
    return date(k // 12, k % 12 + 1, 1)


def day(d: date) -> Period:
    return d, d + timedelta(days=1), "day", d.isoformat()


def week(d: date) -> Period:
    monday = d - timedelta(days=d.weekday())
    iso = monday.isocalendar()
    return monday, monday + timedelta(days=7), "week", f"{iso[0]}-W{iso[1]:02d}"


def weekend(d: date) -> Period:
    saturday = d - timedelta(days=d.weekday()) + timedelta(days=5)
    return saturday, saturday + timedelta(days=2), "weekend", f"{saturday.isoformat()}+1"


def month(y: int, m: int) -> Period:
    first = date(y, m, 1)
    return first, add_months(first, 1), "month", f"{y}-{m:02d}"


def year(y: int) -> Period:
    return date(y, 1, 1), date(y + 1, 1, 1), "year", str(y)


def season(y: int, name: str) -> Period:
    first = date(y, _SEASONS[name], 1)
    label = "autumn" if name == "fall" else name
    return first, add_months(first, 3), "season", f"{y}-{label}"


def unit_of(unit: str, d: date) -> Period:
    return {
        "day": lambda: day(d),
        "week": lambda: week(d),
        "weekend": lambda: weekend(d),
        "month": lambda: month(d.year, d.month),
        "year": lambda: year(d.year),
    }[unit]()


def shift(d: date, unit: str, n: int) -> date:
    if unit == "day":
        return d + timedelta(days=n)
    if unit in ("week", "weekend"):
        return d + timedelta(days=7 * n)
    if unit == "month":
        return add_months(d, n).replace(day=min(d.day, 28))
    return date(d.year + n, d.month, min(d.day, 28))


def nearest_year(ref: date, make: Callable[[int], Period], lean: str | None = None) -> Period:
    """The period of the year nearest ``ref``; a future one counts twice as far.
    ``lean`` "past": the latest one begun by ``ref``; "future": the earliest one not over
    by then (``mnemoray.temporal.tense``: what its clause says of it)."""
    periods = [make(y) for y in (ref.year - 1, ref.year, ref.year + 1)]
    if lean == "past":
        begun = [p for p in periods if p[0] <= ref]
        if begun:
            return begun[-1]
    elif lean == "future":
        ahead = [p for p in periods if p[1] > ref]
        if ahead:
            return ahead[0]

    def distance(p: Period) -> int:
        if p[1] <= ref:
            return (ref - p[1]).days
        return 0 if p[0] <= ref else 2 * (p[0] - ref).days

    return min(periods, key=distance)
