"""What the user said, read back from the stored memories.

Chunk records hold the raw turns as ``[date] speaker: words`` lines
(:func:`mnemoray.memory.records.windows.render_line`), one line start per source event, in
windows that overlap. Each turn is taken once (by its event id), with the ids of
every chunk that holds it (its evidence) and its place in the session, so a reply
can be read against the question before it. A memory that is no chunk, of a session
with no chunk (one added as is, online), is one statement of the user's own.

Whose turn is the user's: the graph's rule (:func:`mnemoray.graph.extract.speaker_of`):
an author that reads as a person's name, or the user. In a two-person conversation
both named speakers are the user's side; an agent ("travel_agent") is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mnemoray.graph.extract import USER_AUTHORS
from mnemoray.graph.names import is_name_like
from mnemoray.memory.records.record import Memory
from mnemoray.memory.records.windows import LINE_START
from mnemoray.sessions.events import iso

_PART = re.compile(r"^(.*) \(part (\d+)/(\d+)\)$")  # a long turn's part, its own line


@dataclass(frozen=True)
class Turn:
    event_id: str
    session_id: str
    speaker: str  # "" for a statement added as is
    text: str
    day: str  # YYYY-MM-DD
    memory_ids: tuple[str, ...]  # the records holding it
    mine: bool  # said by the user's side


def is_user_speaker(author: str) -> bool:
    return author in USER_AUTHORS or is_name_like(author)


def _chunk_turns(m: Memory) -> list[tuple[str, str, str, str, int]] | None:
    """(event id, day, speaker, words, part) per line start of chunk ``m`` (part: which
    part of a long turn, 1 for a whole one); None when its lines do not match its
    events one to one (a message with a line of its own that starts like a turn)."""
    starts = list(LINE_START.finditer(m.text))
    if len(starts) != len(m.source_event_ids) or not starts or starts[0].start() != 0:
        return None
    out = []
    for i, s in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(m.text)
        body = m.text[s.end() : end].strip()
        speaker, sep, words = body.partition(": ")
        if not sep or "\n" in speaker:
            speaker, words = "", body  # a tool result line: no speaker
        part = 1
        if (cut := _PART.match(speaker)) is not None:
            speaker, part = cut.group(1), int(cut.group(2))
        out.append((m.source_event_ids[i], s.group(1), speaker.strip(), words.strip(), part))
    return out


def _day(m: Memory) -> str:
    when = m.event_time_start if m.event_time_start is not None else m.created_at
    return iso(when)[:10]


def read_turns(memories: Iterable[Memory]) -> dict[str, list[Turn]]:
    """Session id -> its turns in order (chunks), or the statements added as is."""
    memories = list(memories)
    chunks = sorted(
        (m for m in memories if m.kind == "chunk"),
        key=lambda m: (m.session_id, m.event_time_start or m.created_at, m.memory_id),
    )
    chunked = {m.session_id for m in chunks}
    holders: dict[tuple[str, str], list[str]] = {}
    found: dict[str, list[tuple[str, str, str]]] = {}
    parts: dict[tuple[str, str], dict[int, str]] = {}  # a long turn's words, part by part
    for m in chunks:
        lines = _chunk_turns(m)
        for event_id, day, speaker, words, part in lines or ():
            key = (m.session_id, event_id)
            if key not in holders:
                holders[key] = []
                found.setdefault(m.session_id, []).append((event_id, day, speaker))
            parts.setdefault(key, {}).setdefault(part, words)
            holders[key].append(m.memory_id)
    out: dict[str, list[Turn]] = {}
    for sid, starts in found.items():
        turns = []
        for eid, day, speaker in starts:
            cut = parts[(sid, eid)]
            said = " ".join(cut[k] for k in sorted(cut) if cut[k])
            if said:
                held = tuple(dict.fromkeys(holders[(sid, eid)]))
                turns.append(Turn(eid, sid, speaker, said, day, held, is_user_speaker(speaker)))
        out[sid] = turns
    for m in memories:
        if m.session_id not in chunked:
            out.setdefault(m.session_id, []).append(
                Turn(m.memory_id, m.session_id, "", m.text, _day(m), (m.memory_id,), True)
            )
    return out


__all__ = ["Turn", "is_user_speaker", "read_turns"]
