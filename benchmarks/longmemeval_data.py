"""LongMemEval questions as mnemoray sessions, with where every event came from.

The file is a list of questions (``shared/data/README.md`` beside the repo describes
it); each holds one user's whole chat history, the haystack. A haystack becomes one
user of app :data:`APP`: its sessions, dated by ``haystack_dates``, built through
``Session.from_dict`` as a client would post them (so event ids are the stable ids the
product derives), and a map from each event id back to its session and turn index,
which is what scoring a recalled record's ``source_event_ids`` needs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mnemoray.sessions.session import Session

APP = "lme"
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
# LongMemEval's roles as mnemoray's; the author keeps the data's name.
ROLES = {"user": "user", "assistant": "model"}


@dataclass(frozen=True)
class Turn:
    """Where an event came from: its session (the store's id and the data's) and its
    position there."""

    session_id: str
    haystack_id: str
    index: int
    text: str
    evidence: bool


@dataclass(frozen=True)
class Haystack:
    """One question with its user's sessions (in date order) and the event map."""

    question_id: str
    question_type: str
    question: str
    asked_at: float
    user_id: str
    sessions: list[Session]
    turns: dict[str, Turn]
    # The store's ids of the sessions that hold the evidence (every copy of a repeated id).
    answer_sessions: frozenset[str]
    evidence: tuple[str, ...]  # event ids of the turns marked has_answer


def parse_date(text: str) -> float:
    """Epoch seconds of a ``"2023/05/20 (Sat) 02:21"`` date (the data names no zone: UTC)."""
    return datetime.strptime(text, DATE_FORMAT).replace(tzinfo=timezone.utc).timestamp()


def user_id(question_id: str) -> str:
    return f"q-{question_id}"


def session_id(index: int, haystack_id: str) -> str:
    """A session's id in the store: its position in the haystack first, since one
    haystack can hold two copies of the same id."""
    return f"{index:02d}-{haystack_id}"


def haystack(item: dict[str, Any]) -> Haystack:
    uid = user_id(item["question_id"])
    answers = set(item["answer_session_ids"])
    sessions: list[Session] = []
    turns: dict[str, Turn] = {}
    answer_sessions: set[str] = set()
    evidence: list[str] = []
    for i, (hid, date, raw_turns) in enumerate(
        zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        )
    ):
        sid = session_id(i, hid)
        start = parse_date(date)
        raw = {
            "app_name": APP,
            "user_id": uid,
            "session_id": sid,
            "created_at": start,
            # One second apart: the turns keep their order and the session's date.
            "events": [
                {
                    "author": t["role"],
                    "role": ROLES[t["role"]],
                    "text": t["content"],
                    "timestamp": start + n,
                }
                for n, t in enumerate(raw_turns)
            ],
        }
        session = Session.from_dict(raw)
        sessions.append(session)
        if hid in answers:
            answer_sessions.add(sid)
        for n, (event, t) in enumerate(zip(session.events, raw_turns, strict=True)):
            turns[event.id] = Turn(sid, hid, n, t["content"], bool(t.get("has_answer")))
            if t.get("has_answer"):
                evidence.append(event.id)
    # Stable: sessions of the same minute keep their haystack order.
    sessions.sort(key=lambda s: s.created_at)
    return Haystack(
        question_id=item["question_id"],
        question_type=item["question_type"],
        question=item["question"],
        asked_at=parse_date(item["question_date"]),
        user_id=uid,
        sessions=sessions,
        turns=turns,
        answer_sessions=frozenset(answer_sessions),
        evidence=tuple(evidence),
    )


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        items: list[dict[str, Any]] = json.load(f)
    return items


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def stratified(items: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first ``n`` questions taken in turn from each question type (types in
    alphabetical order, questions in file order), so a short run sees every type."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        by_type.setdefault(it["question_type"], []).append(it)
    queues = [by_type[t] for t in sorted(by_type)]
    out: list[dict[str, Any]] = []
    depth = 0
    while len(out) < min(n, len(items)):
        for q in queues:
            if depth < len(q) and len(out) < n:
                out.append(q[depth])
        depth += 1
    return out


__all__ = [
    "APP",
    "Haystack",
    "Turn",
    "file_sha256",
    "haystack",
    "load",
    "parse_date",
    "session_id",
    "stratified",
    "user_id",
]
