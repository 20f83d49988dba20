"""Consolidation: a user's old memories merged into higher-level summaries.

    report = consolidate(service, ConsolidationPolicy(min_age_s=30 * 86400))

For each (app, user), the live memories older than the app's ``min_age_s`` (by when
their conversation happened) are grouped by period (``period_s`` buckets, oldest
first, at most ``max_group`` per summary, at least ``min_group``) and each group is
summarized by the configured summarizer into one ``consolidated_summary`` record.
Its ``source_event_ids`` are the ids of the memories it merges: the provenance.

The originals stay searchable (``originals="keep"``) or expire (``"expire"``): they
are forgotten with reason ``"consolidated"`` ``expire_after_s`` after the summary was
written, by a later run (0: by the same run). Idempotent: the consolidation ledger
(``STORE/hygiene/consolidation.db``) lists every merged original, so a second run
merges nothing twice, even after a summary was forgotten; a run stopped between the
summary's commit and the ledger's is healed from the summary's provenance. A user's
forget of an original reaches its summary (``consolidation_cascade``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from mnemoray.errors import InvalidInput
from mnemoray.memory.hygiene import cascade
from mnemoray.memory.hygiene.ledger import ACTOR, CONSOLIDATED_KIND, ConsolidationLedger
from mnemoray.memory.records.kinds import MEMORY_KINDS
from mnemoray.memory.records.record import Memory
from mnemoray.sessions.events import Event, Role
from mnemoray.summarizers.base import Summarizer

if TYPE_CHECKING:
    from mnemoray.memory.service.service import MemoryService

log = logging.getLogger(__name__)

CONSOLIDATED = "consolidated"  # the forget reason of an expired original
DAY = 86400.0
CARRIED = ("open_threads", "decisions", "commitments")  # unioned from the originals
# "[2024-05-01] speaker: words" (chunk lines) or "Speaker: words" (summary lines).
_LINE = re.compile(r"^(?:\[[^\]\n]{1,40}\]\s+)?([A-Za-z][\w .-]{0,59}):\s+(\S.*)$")
_SPEAKER = re.compile(r"[^\w.-]+")


@dataclass(frozen=True)
class ConsolidationPolicy:
    """How one app's old memories are consolidated (see the module docstring)."""

    enabled: bool = True
    min_age_s: float = 30 * DAY
    period_s: float = 30 * DAY
    min_group: int = 3
    max_group: int = 20
    kinds: tuple[str, ...] = ("session_summary", "compaction_summary", "fact", "chunk")
    originals: Literal["keep", "expire"] = "keep"
    expire_after_s: float = 30 * DAY

    def __post_init__(self) -> None:
        for name in ("min_age_s", "expire_after_s"):
            if not float(getattr(self, name)) >= 0:
                raise InvalidInput("must be >= 0 seconds", field=name)
        if not float(self.period_s) > 0:
            raise InvalidInput("must be > 0 seconds", field="period_s")
        for name in ("min_group", "max_group"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise InvalidInput(f"must be an integer >= 2, got {value!r}", field=name)
        if self.max_group < self.min_group:
            raise InvalidInput("must be >= min_group", field="max_group")
        object.__setattr__(self, "kinds", tuple(self.kinds))
        bad = [k for k in self.kinds if k not in MEMORY_KINDS or k == CONSOLIDATED_KIND]
        if bad or not self.kinds:
            raise InvalidInput(
                f"{bad[0] if bad else 'empty'}: expected kinds among "
                f"{', '.join(k for k in MEMORY_KINDS if k != CONSOLIDATED_KIND)}",
                field="kinds",
            )
        if self.originals not in ("keep", "expire"):
            raise InvalidInput(f"{self.originals!r} is not keep or expire", field="originals")

    @property
    def expire_s(self) -> float | None:
        return float(self.expire_after_s) if self.originals == "expire" else None


@dataclass
class ConsolidationReport:
    users: int = 0
    groups: int = 0  # groups merged (one summary each)
    summaries_written: int = 0
    originals_consolidated: int = 0
    originals_expired: int = 0
    ledger_healed: int = 0
    summaries_dropped: int = 0  # a source forgotten on purpose (at once, or caught up)
    dry_run: bool = False
    seconds: float = 0.0
    planned: list[dict[str, Any]] = field(default_factory=list)  # dry run: the groups

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        verb = "would merge" if self.dry_run else "merged"
        return (
            f"consolidation: {self.users} user(s), {verb} {self.originals_consolidated} "
            f"memories into {self.groups} summaries, {self.originals_expired} originals "
            f"expired, {self.seconds:.2f}s"
        )


def memory_time(m: Memory) -> float:
    """When the memory's conversation happened (else when it was stored)."""
    return m.event_time_end if m.event_time_end is not None else m.created_at


def plan_groups(
    memories: Iterable[Memory], policy: ConsolidationPolicy, covered: set[str], now: float
) -> list[list[Memory]]:
    """The groups to merge: eligible memories by period, oldest first, in runs of at
    most ``max_group`` (a run shorter than ``min_group`` waits for a later run)."""
    eligible = sorted(
        (
            m
            for m in memories
            if m.kind in policy.kinds
            and m.memory_id not in covered
            and now - memory_time(m) >= policy.min_age_s
        ),
        key=lambda m: (memory_time(m), m.memory_id),
    )
    # One agent's memories per group: an agent-only memory must never reach a summary
    # that another agent (or every agent) sees (mnemoray.memory.store.scopes).
    buckets: dict[tuple[str, int], list[Memory]] = {}
    for m in eligible:
        buckets.setdefault((m.agent_name, int(memory_time(m) // policy.period_s)), []).append(m)
    groups: list[list[Memory]] = []
    for _, members in sorted(buckets.items()):
        for i in range(0, len(members), policy.max_group):
            run = members[i : i + policy.max_group]
            if len(run) >= policy.min_group:
                groups.append(run)
    return groups


def stand_ins(m: Memory) -> list[Event]:
    """A memory as events the summarizer reads: its ``speaker: words`` lines keep their
    speaker (a fact is the user's own statement)."""
    out: list[Event] = []
    role: Role
    lines = [ln.strip() for ln in m.text.splitlines() if ln.strip()]
    for j, line in enumerate(lines):
        match = _LINE.match(line)
        if m.kind == "fact":
            author, role, text = "user", "user", line
        elif match:
            speaker = _SPEAKER.sub("_", match.group(1).strip()) or "memory"
            is_user = speaker.casefold() == "user"
            author, role, text = (
                "user" if is_user else speaker,
                "user" if is_user else "model",
                match.group(2).strip(),
            )
        else:
            author, role, text = "memory", "model", line
        out.append(
            Event(
                author=author,
                role=role,
                type="message",
                text=text,
                id=f"{m.memory_id}#{j}",
                session_id=m.session_id,
                timestamp=memory_time(m),
            )
        )
    return out


def summarize_group(group: Sequence[Memory], summarizer: Summarizer, now: float) -> Memory | None:
    """The consolidated record of ``group`` (None: the summarizer said nothing)."""
    events = [e for m in group for e in stand_ins(m)]
    summary = summarizer.summarize(events)
    text = summary.summary.strip()
    if not text:
        return None
    first = group[0]
    ids = tuple(m.memory_id for m in group)
    digest = hashlib.sha256("\x1f".join(ids).encode()).hexdigest()[:16]
    topics = tuple(summary.topics)
    key = text + ("\nTopics: " + ", ".join(topics) if topics else "")
    return Memory(
        app_name=first.app_name,
        user_id=first.user_id,
        session_id=f"consolidated:{digest}",
        kind=CONSOLIDATED_KIND,  # type: ignore[arg-type]
        text=text,
        source_event_ids=ids,
        key_text=key,
        topics=topics,
        key_facts=tuple(f.text for f in summary.key_facts),
        entities=tuple(summary.entities),
        event_time_start=min(
            m.event_time_start if m.event_time_start is not None else memory_time(m) for m in group
        ),
        event_time_end=max(memory_time(m) for m in group),
        created_at=now,
        agent_name=first.agent_name,
        # What the originals left open or settled stays on the summary.
        **cast("dict[str, Any]", {name: _union(group, name) for name in CARRIED}),
    )


def _union(group: Sequence[Memory], name: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(x for m in group for x in getattr(m, name)))


def consolidate_user(
    service: MemoryService,
    app_name: str,
    user_id: str,
    policy: ConsolidationPolicy,
    ledger: ConsolidationLedger,
    *,
    summarizer: Summarizer | None = None,
    now: float | None = None,
    dry_run: bool = False,
    report: ConsolidationReport | None = None,
) -> ConsolidationReport:
    """Consolidate one user's old memories, then expire the originals that are due."""

    now = time.time() if now is None else now
    report = report or ConsolidationReport(dry_run=dry_run)
    report.users += 1
    if not dry_run:  # forgets this store's cascade did not see reach their summaries
        report.summaries_dropped += cascade.catch_up(service, ledger, app_name, user_id)
    rows = service.snapshot().rows_for_user(app_name, user_id)
    summaries = [
        (m.memory_id, m.source_event_ids, m.created_at) for m in rows if m.kind == CONSOLIDATED_KIND
    ]
    if not dry_run:
        report.ledger_healed += ledger.reconcile(app_name, user_id, summaries, policy.expire_s)
    covered = ledger.covered(app_name, user_id)
    covered.update(i for _, ids, _ in summaries for i in ids)
    summ = summarizer or service.summarizer
    prompt = service.memory_prompt(app_name)  # the app's memory_prompt, if any
    if prompt is not None:
        summ = summ.with_prompt(prompt)
    merged: list[tuple[Memory, Sequence[Memory]]] = []  # (summary, its originals)
    for group in plan_groups(rows, policy, covered, now):
        if dry_run:
            report.groups += 1
            report.originals_consolidated += len(group)
            report.planned.append(
                {
                    "app_name": app_name,
                    "user_id": user_id,
                    "memory_ids": [m.memory_id for m in group],
                }
            )
            continue
        record = summarize_group(group, summ, now)
        if record is None:
            log.warning(
                "consolidation of %d memories of %s/%s: the summarizer returned "
                "nothing; left as they are",
                len(group),
                app_name,
                user_id,
            )
            continue
        merged.append((record, group))
    if merged:
        # One commit for the user's summaries, then the ledger (a stop in between is
        # healed by the next run's reconcile).
        written = service.add_memories([r for r, _ in merged], actor=ACTOR)
        kept = cascade.drop_orphans(service, ledger, app_name, user_id, merged)
        report.summaries_dropped += len(merged) - len(kept)
        written = [w for w in written if any(w.memory_id == r.memory_id for r, _ in kept)]
        merged = kept
        expire_at = None if policy.expire_s is None else now + policy.expire_s
        for record, originals in merged:
            ledger.record(
                app_name,
                user_id,
                record.memory_id,
                [m.memory_id for m in originals],
                expire_at,
                now=now,
            )
            report.originals_consolidated += len(originals)
        report.groups += len(merged)
        report.summaries_written += len(written)
    if not dry_run:
        report.originals_expired += expire_due(service, app_name, user_id, ledger, now)
    return report


def expire_due(
    service: MemoryService,
    app_name: str,
    user_id: str,
    ledger: ConsolidationLedger,
    now: float | None = None,
) -> int:
    """Forget (reason ``consolidated``) the user's originals whose expiry has come."""
    due = ledger.due(app_name, user_id, now)
    if not due:
        return 0
    hidden = service.forget_memories(app_name, user_id, due, reason=CONSOLIDATED, actor=ACTOR)
    ledger.mark_expired(app_name, user_id, due, now)
    return hidden


def consolidate(
    service: MemoryService,
    policy: ConsolidationPolicy | None = None,
    *,
    app_policies: Mapping[str, ConsolidationPolicy] | None = None,
    apps: Iterable[str] | None = None,
    users: Iterable[tuple[str, str]] | None = None,
    ledger: ConsolidationLedger | None = None,
    summarizer: Summarizer | None = None,
    now: float | None = None,
    dry_run: bool = False,
) -> ConsolidationReport:
    """Consolidate every user of the store (or of ``apps``, or the ``users`` given),
    each with its app's policy (``app_policies``, else ``policy``)."""
    start = time.perf_counter()
    default = policy or ConsolidationPolicy()
    per_app = dict(app_policies or {})
    own = ledger is None
    ledger = ledger or ConsolidationLedger.of_store(service.store.root)
    wanted = None if apps is None else set(apps)
    report = ConsolidationReport(dry_run=dry_run)
    try:
        service.reloader.refresh()
        tenants = list(users) if users is not None else service.snapshot().tenants()
        for app_name, user_id in tenants:
            app_policy = per_app.get(app_name, default)
            if (wanted is not None and app_name not in wanted) or not app_policy.enabled:
                continue
            consolidate_user(
                service,
                app_name,
                user_id,
                app_policy,
                ledger,
                summarizer=summarizer,
                now=now,
                dry_run=dry_run,
                report=report,
            )
    finally:
        if own:
            ledger.close()
    report.seconds = time.perf_counter() - start
    return report


__all__ = [
    "CONSOLIDATED",
    "ConsolidationPolicy",
    "ConsolidationReport",
    "consolidate",
    "consolidate_user",
    "expire_due",
    "memory_time",
    "plan_groups",
    "stand_ins",
    "summarize_group",
]
