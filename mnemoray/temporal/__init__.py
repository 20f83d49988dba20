"""Time in text: expressions resolved against a session's date, and what a question
asks of time (docs/graph.md, "Time"). Stdlib only, deterministic."""

from mnemoray.temporal.expressions import CALENDAR_WORDS, TimeSpan, is_vague, resolve_times
from mnemoray.temporal.intent import TimeIntent, time_intent
from mnemoray.temporal.periods import epoch, to_date

__all__ = [
    "CALENDAR_WORDS",
    "TimeIntent",
    "TimeSpan",
    "epoch",
    "is_vague",
    "resolve_times",
    "time_intent",
    "to_date",
]
