"""What a question asks of time: when something happened, or how things were before.

    time_intent("When did Melanie adopt Max?").asks_when           # True
    time_intent("Where did I live before Berlin?").about_past      # True
    time_intent("What did we do last May?", "2023-06-12").spans    # (TimeSpan 2022-05,)

Recall uses it to pick axes: a "when" question prefers records that carry a date; a
question about the past looks at facts whose validity has closed, not only at what
holds now; named periods select memories of that time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mnemoray.temporal.expressions import TimeSpan, resolve_times

_WHEN = re.compile(
    r"\b(?:when\s+(?:did|was|were|is|are|do|does|will|has|have|had|would)"
    r"|what\s+(?:year|month|day|date|time|week|season)|which\s+(?:year|month|day|week)"
    r"|how\s+long\s+(?:ago|has|have|had|did|was|were)|since\s+when|what\s+age"
    r"|how\s+old\s+was|at\s+what\s+point)\b",
    re.IGNORECASE,
)
_PAST = re.compile(
    r"\b(?:before|used\s+to|did\b[^?.!]*?\buse\s+to|previously|earlier|formerly"
    r"|in\s+the\s+past|originally"
    r"|at\s+first|prior\s+to|former|back\s+when|no\s+longer|any\s+more|anymore"
    r"|old\s+(?:job|house|home|apartment|flat|place|address|car|school|company)"
    r"|first\s+(?:job|house|home|car|apartment))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeIntent:
    """``asks_when``: the answer is a time; ``about_past``: the question asks how things
    were before, not how they are now; ``spans``: the periods it names (resolved against
    the reference when given); ``cues``: the words that said so, for explanations."""

    asks_when: bool
    about_past: bool
    spans: tuple[TimeSpan, ...]
    cues: tuple[str, ...]

    @property
    def temporal(self) -> bool:
        return self.asks_when or self.about_past or bool(self.spans)


def time_intent(question: str, reference: Any = None) -> TimeIntent:
    """The time intent of ``question``; without a ``reference`` only absolute periods
    ("May 2023", "in 2019") are resolved, relative ones need a date to stand on."""
    when = [m.group(0) for m in _WHEN.finditer(question)]
    past = [m.group(0) for m in _PAST.finditer(question)]
    if reference is None:
        spans = tuple(s for s in resolve_times(question, "2000-01-01") if not s.relative)
    else:
        spans = tuple(resolve_times(question, reference))
    return TimeIntent(
        bool(when), bool(past), spans, tuple(" ".join(c.lower().split()) for c in (*when, *past))
    )
