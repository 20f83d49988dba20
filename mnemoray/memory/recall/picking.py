"""Which ranked records a recall returns: no two that say the same thing, and, with a
token budget, the best set that fits.

A user's records overlap by construction: a fact is one sentence of a turn that a
chunk holds whole, a session summary repeats sentences of its chunks, the same
sentence said in two sessions is two facts. Returning each costs the reader tokens
and places for nothing, so the ranking is read best first and a record is

- left out when its words are mostly (:data:`COVERED`) those of a better-ranked
  record of the same session whose sources (``source_event_ids``) it shares, or of
  a better record it shares no source with (the same words said again: the same
  words, or mostly the same for a record of :data:`MIN_TERMS` terms or more whose
  lines of fewer terms that record holds word for word);
- shown in the place of a better-ranked fact or summary of its session whose words
  it holds when it is a chunk (the evidence layer): the words the fact came from,
  with who said them and when, ranked as the fact was (:attr:`Pick.ranked`: the
  fact's score and signals); later ones it holds are left out;
- left out when it is a session summary below a record of its session: the summary is
  a digest of that session's words, the record their evidence;
- joined to a better-ranked part of the same long turn when the question asks about
  what that turn's side said (:func:`mnemoray.memory.recall.speakers.asked_side`): a
  turn cut into parts at ingest (:mod:`mnemoray.memory.records.windows`) comes back
  as one passage (:func:`joined`, in part order) in the place of its best part, each
  part counting as one of ``top_k``.

Words are compared as content terms (:func:`mnemoray.text.terms`: stopwords out,
light stemming), so "I moved to Berlin." and a chunk line quoting it match whatever
the prefix and punctuation. With ``budget_tokens``, a record is taken only if its text
still fits what is left (a longer one is passed over for shorter ones after it; a
chunk that does not fit leaves its fact in place), counted with
:func:`mnemoray.tokens.count_tokens`; what was passed over repeats nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from mnemoray.memory.recall.speakers import Side, is_user_side
from mnemoray.memory.records.record import Memory
from mnemoray.memory.records.windows import EXPANSION, LINE_HEAD, LINE_START, PART
from mnemoray.text import terms
from mnemoray.tokens import count_tokens

# Share of a record's content terms another record must hold for it to repeat that one.
COVERED = 0.8
# Content terms a record needs before a record it shares no source with can repeat it,
# and under which a line of it is repeated only word for word: fewer ("Thanks, the
# bike!") are held by chance.
MIN_TERMS = 6


@dataclass(frozen=True)
class Pick:
    """One returned record: ``shown`` the position whose record is returned, ``ranked``
    the one whose score placed it (the same, or the fact a chunk stands in for). A
    joined passage (``parts``) is returned as :func:`joined` of those parts, ranked by
    ``ranked``."""

    shown: int
    ranked: int
    #: A long turn's parts shown as one passage: their positions in part order (``shown``
    #: among them); empty for a record shown alone.
    parts: tuple[int, ...] = ()


@dataclass
class _Picked:
    pos: int
    memory: Memory
    terms: frozenset[str]
    exact: str  # its words, case and spacing aside
    ranked: int
    pieces: dict[int, tuple[int, Memory]] = field(default_factory=dict)  # part -> record
    turn: tuple[str, str, int] | None = None  # joined: (event, speaker, parts)
    # A joined passage's words part by part: another session's record repeats one part,
    # not the union of them.
    piece_terms: tuple[frozenset[str], ...] = ()

    def positions(self) -> set[int]:
        """The positions it shows: its own, and a joined passage's parts."""
        return {self.pos, *(p for p, _ in self.pieces.values())}


def _part_of(m: Memory, event: str) -> tuple[str, int, int] | None:
    """Who said event ``event``'s long turn, and which part of how many of it chunk ``m``
    holds, if it holds a part of it: a window's first line goes on with a turn cut
    before it, its last line starts a turn cut after it."""
    ids = m.source_event_ids
    if m.kind != "chunk" or event not in ids:
        return None
    text = m.text or ""
    found = list(PART.finditer(text))
    if not found:
        return None
    line = None
    if found[0].start() == 0 and event == ids[0]:
        line = found[0]
    elif event == ids[-1] and not LINE_START.search(text, found[-1].end()):
        line = found[-1]
    return None if line is None else (line.group(1), int(line.group(2)), int(line.group(3)))


def joined(parts: Sequence[Memory]) -> Memory:
    """A long turn's parts (in order, at least one) as one record: the first part's
    record (its id) with all the parts' words, sources and times."""
    first = parts[0]
    sources = dict.fromkeys(e for m in parts for e in m.source_event_ids)
    starts = [m.event_time_start for m in parts if m.event_time_start is not None]
    ends = [m.event_time_end for m in parts if m.event_time_end is not None]
    return replace(
        first,
        text="\n".join(m.text for m in parts),
        source_event_ids=tuple(sources),
        event_time_start=min(starts) if starts else first.event_time_start,
        event_time_end=max(ends) if ends else first.event_time_end,
    )


def _said(m: Memory) -> str:
    return EXPANSION.sub("", m.text or "")


def _exact(m: Memory) -> str:
    return " ".join(_said(m).casefold().split())


def _short_lines(m: Memory) -> list[str]:
    """The lines of ``m`` with fewer than :data:`MIN_TERMS` content terms (a chunk
    line's date and speaker aside), case and spacing aside: another record repeats them
    only word for word, as few terms are held by chance ("28. Kg3 would be my move."
    beside a chess game's moves quoted again)."""
    out = []
    for line in _said(m).splitlines():
        body = LINE_HEAD.sub("", line, count=1)
        found = terms(body)
        if found and len(set(found)) < MIN_TERMS:
            out.append(" ".join(body.casefold().split()))
    return out


def _turn_chunk(
    pos: int,
    mine: frozenset[str],
    turn_chunks: Callable[[int], Sequence[int]],
    memories: Callable[[Sequence[int]], list[Memory]],
) -> tuple[int, Memory, frozenset[str]] | None:
    """The chunk of fact ``pos``'s turn that holds most of its words (a long turn is in
    several parts), if one holds them."""
    found = [p for p in turn_chunks(pos) if p != pos]
    best: tuple[int, Memory, frozenset[str]] | None = None
    share = 0.0
    for p, chunk in zip(found, memories(found), strict=True):
        have = frozenset(terms(_said(chunk)))
        held = len(mine & have) / len(mine) if mine else 0.0
        if held > share:
            best, share = (p, chunk, have), held
    return best if best is not None and share >= COVERED else None


def _same_session(a: Memory, b: Memory) -> bool:
    return (a.app_name, a.user_id, a.session_id) == (b.app_name, b.user_id, b.session_id)


def _covers(have: frozenset[str], want: frozenset[str]) -> bool:
    """Whether ``have`` holds most of ``want`` (an empty ``want`` repeats nothing)."""
    return bool(want) and len(want & have) >= COVERED * len(want)


def pick(
    order: Sequence[int],
    memories: Callable[[Sequence[int]], list[Memory]],
    top_k: int,
    budget_tokens: int | None = None,
    *,
    same_words: bool = True,
    turn_chunks: Callable[[int], Sequence[int]] | None = None,
    join_side: Side | None = None,
) -> list[Pick]:
    """The records to return, from ``order`` (best first; ``memories`` builds the
    records of positions): at most ``top_k``, none repeating a better one (see the
    module), and with ``budget_tokens`` only what fits in that many tokens of text.
    ``same_words`` False: the same words in two sessions are two memories (app-wide,
    two users saying the same sentence); records then repeat only within a session.
    ``turn_chunks``: position -> the (eligible) chunks holding that record's source
    events: a fact whose chunk did not rank near it is shown as that chunk all the same.
    ``join_side``: the side whose long turns' parts are joined into one passage (None:
    none are)."""
    chosen: list[_Picked] = []
    left = float("inf") if budget_tokens is None else float(budget_tokens)

    def cost(m: Memory) -> int:
        return count_tokens(m.text) if budget_tokens is not None else 0

    def join(pos: int, m: Memory, mine: frozenset[str]) -> bool:
        """Show chunk ``m``, a part of a long turn of the side asked about, with the
        parts of that turn already chosen: one passage where the turn was cut."""
        nonlocal left
        if join_side is None or m.kind != "chunk":
            return False
        for i, c in enumerate(chosen):
            if c.memory.kind != "chunk" or not _same_session(c.memory, m):
                continue
            for event in set(m.source_event_ids) & set(c.memory.source_event_ids):
                part = _part_of(m, event)
                if part is None:
                    continue
                speaker, k, n = part
                side = "user" if is_user_side(speaker) else "assistant"
                if side != join_side:
                    continue
                if c.pieces:
                    turn, pieces, each = c.turn, dict(c.pieces), c.piece_terms
                else:
                    mate = _part_of(c.memory, event)
                    if mate is None:
                        continue
                    turn, pieces = (event, mate[0], mate[2]), {mate[1]: (c.pos, c.memory)}
                    each = (c.terms,)
                if turn != (event, speaker, n) or k in pieces:
                    continue  # another turn's part, or this part already shown
                pieces[k] = (pos, m)
                whole = joined([pieces[j][1] for j in sorted(pieces)])
                extra = cost(whole) - cost(c.memory)
                if extra > left:
                    return False
                each = (*each, mine)
                have = c.terms | mine
                chosen[i] = _Picked(c.pos, whole, have, _exact(whole), c.ranked, pieces, turn, each)
                left -= extra
                return True
        return False

    records = memories(list(order))
    for pos, m in zip(order, records, strict=True):
        if sum(max(1, len(c.pieces)) for c in chosen) >= top_k or left <= 0:
            break
        mine = frozenset(terms(_said(m)))
        exact = _exact(m)
        short: list[str] | None = None  # read only when a record covers it
        sources = set(m.source_event_ids)
        elsewhere, held, replaced = False, False, None
        for i, c in enumerate(chosen):
            related = _same_session(m, c.memory) and bool(sources & set(c.memory.source_event_ids))
            if not related:
                # A record it shares no source with: the same words said again.
                again = bool(exact) and exact == c.exact
                covered = len(mine) >= MIN_TERMS and any(
                    _covers(t, mine) for t in c.piece_terms or (c.terms,)
                )
                if not again and covered:
                    short = _short_lines(m) if short is None else short
                    again = all(line in c.exact for line in short)
                elsewhere = elsewhere or (same_words and again)
                continue
            held = held or _covers(c.terms, mine)
            chunk_of = m.kind == "chunk" and c.memory.kind != "chunk"
            if replaced is None and chunk_of and _covers(mine, c.terms):
                replaced = i
        # A chunk that holds a better fact of its turn is shown in its place even where a
        # summary holds the chunk too: the chunk is the evidence, the summary a digest.
        if elsewhere or (held and replaced is None):
            continue
        if m.kind == "session_summary" and any(_same_session(m, c.memory) for c in chosen):
            continue  # below a record of its session, its digest repeats that session
        if replaced is not None:
            # The chunk takes the first place it covers and drops the later ones it holds.
            gone = [
                j
                for j, c in enumerate(chosen)
                if j > replaced
                and _same_session(c.memory, m)
                and sources & set(c.memory.source_event_ids)
                and _covers(mine, c.terms)
            ]
            extra = (
                cost(m) - cost(chosen[replaced].memory) - sum(cost(chosen[j].memory) for j in gone)
            )
            if extra > left:
                continue  # what it holds is shown already, and it does not fit
            chosen[replaced] = _Picked(pos, m, mine, exact, chosen[replaced].ranked)
            chosen = [c for j, c in enumerate(chosen) if j not in gone]
            left -= extra
            continue
        if m.kind == "fact" and turn_chunks is not None:
            shown = _turn_chunk(pos, mine, turn_chunks, memories)
            if shown is not None and any(shown[0] in c.positions() for c in chosen):
                continue  # its chunk is shown already
            if shown is not None and join(shown[0], shown[1], shown[2]):
                continue
            if shown is not None and cost(shown[1]) <= left:
                chosen.append(_Picked(shown[0], shown[1], shown[2], _exact(shown[1]), pos))
                left -= cost(shown[1])
                continue
        if join(pos, m, mine):
            continue
        if cost(m) <= left:  # else a shorter one after it may fit
            chosen.append(_Picked(pos, m, mine, exact, pos))
            left -= cost(m)
    return [Pick(c.pos, c.ranked, tuple(c.pieces[j][0] for j in sorted(c.pieces))) for c in chosen]


__all__ = ["COVERED", "MIN_TERMS", "Pick", "joined", "pick"]
