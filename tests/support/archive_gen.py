"""A small generated session archive for the pipeline tests (deterministic)."""

from __future__ import annotations

import json
from pathlib import Path

from mnemoray.backfill.archive import write_archive
from mnemoray.sessions.events import model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from tests.support.factories import T0

TOPICS = [
    ("I adopted a beagle named Max last month.", "Beagles love long walks."),
    ("I'm allergic to peanuts, so check recipes for me.", "Noted, I will flag peanuts."),
    ("We moved from Berlin to Madrid in March.", "Madrid is sunny most of the year."),
    ("I play the cello in a community orchestra.", "That sounds like a lot of fun."),
    ("My daughter starts school in September.", "Good luck to her!"),
    ("I drive an old blue Volvo station wagon.", "Volvos last forever."),
    ("I'm learning Japanese for a trip to Kyoto.", "Kyoto in autumn is beautiful."),
    ("I work as a nurse on night shifts.", "Night shifts are hard on sleep."),
]


def make_session(i: int, users: int = 5, turns: int = 6, app: str = "app") -> Session:
    """Session ``s{i}`` of user ``u{i % users}``: messages and a tool call, fixed ids."""
    sid, t = f"s{i:04d}", T0 + i * 3600.0
    fact, reply = TOPICS[i % len(TOPICS)]
    events = [
        user_message(f"{fact} (session {i})", id=f"{sid}-e0", timestamp=t),
        model_message("assistant", reply, id=f"{sid}-e1", timestamp=t + 10),
    ]
    call = tool_call(
        "assistant", "lookup", {"q": f"item {i}"}, call_id=f"c{i}", id=f"{sid}-e2", timestamp=t + 20
    )
    events += [
        call,
        tool_result(
            "assistant", "lookup", {"hits": i % 7}, f"c{i}", id=f"{sid}-e3", timestamp=t + 21
        ),
    ]
    for k in range(turns):
        ts = t + 30 + 10 * k
        events.append(
            user_message(
                f"Question {k} about topic {i % 11}: what about plan {k}?",
                id=f"{sid}-u{k}",
                timestamp=ts,
            )
            if k % 2 == 0
            else model_message(
                "assistant",
                f"Answer {k}: plan {k} looks fine for topic {i % 11}.",
                id=f"{sid}-m{k}",
                timestamp=ts + 1,
            )
        )
    return Session(app, f"u{i % users}", sid, events=events, created_at=t)


BAD_LINES = [
    "{not json",
    json.dumps({"user_id": "x"}),
    json.dumps(
        {
            "app_name": "app",
            "user_id": "u1",
            "session_id": "bad-role",
            "events": [
                {
                    "id": "e",
                    "role": "robot",
                    "type": "message",
                    "author": "r",
                    "text": "hi",
                    "timestamp": T0,
                }
            ],
        }
    ),
]


def make_archive(
    root: Path,
    sessions: int,
    *,
    files: int = 3,
    bad: bool = True,
    parquet: bool = True,
    users: int = 5,
) -> int:
    """Write ``sessions`` sessions over ``files`` files (+ bad rows); returns bad-row count."""
    root.mkdir(parents=True, exist_ok=True)
    all_sessions = [make_session(i, users=users) for i in range(sessions)]
    for f in range(files):
        part = all_sessions[f::files]
        suffix = ".parquet" if parquet and f == files - 1 else ".jsonl"
        write_archive(part, root / f"part-{f:03d}{suffix}")
    if not bad:
        return 0
    (root / "part-bad.jsonl").write_text("\n".join(BAD_LINES) + "\n")
    return len(BAD_LINES)
