"""An app's domain index: what its users' memories cover, by topic and by month.

    index = domain_index("app", version, {user: topics, ...})

Built from what each user gives it (:class:`~mnemoray.profiles.profile.UserTopics`:
counts and topic terms, never text), so it reads across the users of one app and
names none of them: it is for an app-wide reader only (``GET /v1/domains/{app}``
takes an ``app_wide`` key). The parts of a sharded store add up
(:func:`merged_index`): each user lives in one shard.

- topics: per topic term, the users, sessions and user turns naming it, and the
  first and last month it came up; the most covered first (:data:`MAX_TOPICS`);
- well covered: topics that :data:`WELL_SESSIONS` sessions or more came back to;
- weakly covered: topics named in :data:`MIN_MENTIONS` turns or more, but only in
  one session (raised once, never followed up);
- cross-cutting themes: topics held by at least :data:`CROSS_USERS` users, counted
  by users;
- periods: every month from the first to the last memory (months without any
  included: the gaps), with memories, sessions and users;
- eras mentioned: the years and decades the memories talk about (dates and periods
  in the entity graph: "in 1990", "last summer"), with memories and users.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mnemoray.errors import NotFound
from mnemoray.profiles.profile import MIN_MENTIONS, UserTopics

MAX_TOPICS = 50
MAX_LISTED = 20  # well / weakly covered / cross-cutting, each
WELL_SESSIONS = 3
CROSS_USERS = 2
MAX_MONTHS = 600  # a span longer than this lists its last MAX_MONTHS months


@dataclass(frozen=True)
class TopicCoverage:
    topic: str
    term: str
    users: int
    sessions: int
    mentions: int
    first_month: str
    last_month: str


@dataclass(frozen=True)
class PeriodCoverage:
    period: str  # YYYY-MM
    memories: int
    sessions: int
    users: int


@dataclass(frozen=True)
class DomainIndex:
    app_name: str
    store_version: int
    users: int
    sessions: int
    memories: int
    topics: list[TopicCoverage]
    well_covered: list[str]
    weakly_covered: list[str]
    cross_cutting: list[dict[str, Any]]  # {"topic", "term", "users"}
    periods: list[PeriodCoverage]
    eras_mentioned: list[dict[str, Any]]  # {"era": "2023" | "1990s", "memories", "users"}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DomainPart:
    """What one replica's shards give an app's index (picklable: Ray returns it)."""

    store_version: int
    users: dict[str, UserTopics]


def merged_index(app: str, parts: Sequence[DomainPart]) -> DomainIndex:
    """The index of ``app`` from every shard's part (a user lives in one shard), at the
    oldest version any part was read at."""
    users: dict[str, UserTopics] = {}
    for part in parts:
        users.update(part.users)
    return with_memories(domain_index(app, min(p.store_version for p in parts), users))


def with_memories(index: DomainIndex) -> DomainIndex:
    """``index``, or NotFound when the app has no memories (nothing to index)."""
    if not index.memories:
        raise NotFound(f"app {index.app_name!r} has no memories: no domain index", field="app_name")
    return index


def _months(first: str, last: str) -> list[str]:
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out[-MAX_MONTHS:]


def domain_index(app: str, version: int, users: Mapping[str, UserTopics]) -> DomainIndex:
    """The domain index of ``app`` from what each of its ``users`` gives it."""
    holders: Counter[str] = Counter()
    sessions: Counter[str] = Counter()
    mentions: Counter[str] = Counter()
    labels: dict[str, Counter[str]] = {}
    months: dict[str, set[str]] = {}
    per_month: dict[str, list[int]] = {}  # memories, sessions, users
    eras: dict[str, list[int]] = {}  # memories, users
    for topics in users.values():
        for era, n in topics.mentioned.items():
            row = eras.setdefault(era, [0, 0])
            row[0] += n
            row[1] += 1
        for term, c in topics.terms.items():
            holders[term] += 1
            sessions[term] += len(c.sessions)
            mentions[term] += c.mentions
            labels.setdefault(term, Counter()).update(c.words)
            months.setdefault(term, set()).update(c.months)
        for month, (n, sids) in topics.months.items():
            row = per_month.setdefault(month, [0, 0, 0])
            row[0] += n
            row[1] += len(sids)
            row[2] += 1

    def label(term: str) -> str:
        return labels[term].most_common(1)[0][0]

    ranked = sorted(holders, key=lambda t: (-sessions[t], -mentions[t], -holders[t], t))
    coverage = [
        TopicCoverage(
            label(t), t, holders[t], sessions[t], mentions[t], min(months[t]), max(months[t])
        )
        for t in ranked[:MAX_TOPICS]
    ]
    well = [label(t) for t in ranked if sessions[t] >= WELL_SESSIONS][:MAX_LISTED]
    weak = [
        label(t)
        for t in sorted(holders, key=lambda t: (-mentions[t], t))
        if sessions[t] == 1 and mentions[t] >= MIN_MENTIONS
    ][:MAX_LISTED]
    cross = [
        {"topic": label(t), "term": t, "users": holders[t]}
        for t in sorted(holders, key=lambda t: (-holders[t], -sessions[t], t))
        if holders[t] >= CROSS_USERS
    ][:MAX_LISTED]
    periods = [
        PeriodCoverage(p, *per_month.get(p, (0, 0, 0)))
        for p in (_months(min(per_month), max(per_month)) if per_month else [])
    ]
    return DomainIndex(
        app,
        version,
        len(users),
        sum(u.sessions for u in users.values()),
        sum(u.memories for u in users.values()),
        coverage,
        well,
        weak,
        cross,
        periods,
        [{"era": e, "memories": m, "users": u} for e, (m, u) in sorted(eras.items())],
    )


__all__ = [
    "DomainIndex",
    "DomainPart",
    "PeriodCoverage",
    "TopicCoverage",
    "domain_index",
    "merged_index",
    "with_memories",
]
