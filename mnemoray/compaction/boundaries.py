"""Semantic boundaries in a conversation: where compaction should close a window.

A boundary is the index of the event that opens a new segment; the compactor
closes the segment before it as one window. Three kinds:

- ``phrase``: a user message that says so ("let's move on to ...", "new topic");
  the message itself opens the new segment.
- ``task_done``: a model message, tool result or control event that marks the
  task finished (``data.task_done: true``, a ``status`` of done/completed, a
  control ``action: "task_done"``, or a model message starting "Task complete");
  the next invocation opens the new segment.
- ``topic_shift``: the embedding similarity between consecutive windows of turns
  drops below a threshold (:func:`topic_shifts`). Vectors come from an injected
  ``encode`` callable (the configured embedder); without one, a deterministic
  hashed bag of stemmed words stands in: lexical, so it only sees shifts between
  turns that share no content words.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnemoray.compaction.fields import BoundaryKind
from mnemoray.sessions.events import Event
from mnemoray.text import terms

__all__ = [
    "Boundary",
    "CachedEncoder",
    "Encode",
    "find_boundaries",
    "hashed_encode",
    "marks_task_done",
    "says_move_on",
    "topic_shifts",
]
Encode = Callable[[list[str]], Any]  # texts -> (n, dim) array

TOPIC_CONTEXT = 3  # turns before a candidate shift, compared with ...
TOPIC_AHEAD = 2  # ... the turns from it on
MIN_TOPIC_WORDS = 4  # shorter turns ("ok, thanks") never shift the topic
HASH_DIM = 1024

_PHRASE = re.compile(
    r"\b(?:let(?:'s| us)|lets) (?:move on|switch|change (?:the )?(?:topic|subject)|talk about "
    r"something else)|\bmoving on\b|\bnew topic\b|\bchange of (?:topic|subject)\b"
    r"|\bchanging (?:the )?(?:topic|subject)\b|\bswitching gears\b|\bon another note\b"
    r"|\b(?:different|unrelated) (?:question|topic)\b",
    re.IGNORECASE,
)
_DONE_TEXT = re.compile(
    r"^\s*(?:task (?:is )?(?:complete|completed|done|finished)|all done)\b", re.IGNORECASE
)
_DONE_STATUS = frozenset({"done", "complete", "completed", "finished", "succeeded"})


@dataclass(frozen=True)
class Boundary:
    index: int  # the event that opens the new segment
    kind: BoundaryKind


def says_move_on(event: Event) -> bool:
    """A user message announcing a new subject."""
    text = event.text.replace("\u2019", "'")
    return event.role == "user" and event.type == "message" and bool(_PHRASE.search(text))


def marks_task_done(event: Event) -> bool:
    """An event that tells the task is finished (see module doc)."""
    data = event.data
    if event.type == "control":
        return data.get("action") == "task_done"
    if event.type == "tool_result":
        response = data.get("response")
        data = response if isinstance(response, dict) else {}
    elif not (event.type == "message" and event.role == "model"):
        return False
    status = data.get("status")
    if data.get("task_done") is True or (
        isinstance(status, str) and status.lower() in _DONE_STATUS
    ):
        return True
    return event.type == "message" and bool(_DONE_TEXT.match(event.text))


def hashed_encode(texts: list[str]) -> np.ndarray:
    """Deterministic fallback vectors: signed feature hashing of stemmed content words."""
    out = np.zeros((len(texts), HASH_DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for term in terms(text):
            h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
            out[row, h % HASH_DIM] += 1.0 if (h >> 32) & 1 else -1.0
    return out


class CachedEncoder:
    """``encode`` with a bounded per-text cache: a growing session is re-planned after
    every append, and each turn should be embedded once. Bounded by entries and by the
    bytes its texts and vectors hold (long turns must not pin the memory)."""

    def __init__(
        self, encode: Encode, max_items: int = 4096, max_bytes: int = 64 * 1024 * 1024
    ) -> None:
        self._encode = encode
        self._max = max_items
        self._max_bytes = max_bytes
        self._cache: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()  # vec, bytes
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def cached_items(self) -> int:
        return len(self._cache)

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def __call__(self, texts: list[str]) -> np.ndarray:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for t in texts:
                if t in self._cache:
                    found[t] = self._cache[t][0]
                    self._cache.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            vectors = np.asarray(self._encode(missing), dtype=np.float32)
            found.update(zip(missing, vectors, strict=True))
            with self._lock:
                for text, vec in zip(missing, vectors, strict=True):
                    self._put(text, vec)
        if not texts:
            return np.zeros((0, HASH_DIM), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def _put(self, text: str, vec: np.ndarray) -> None:
        """Cache one entry (the lock held), evicting the least recently used."""
        size = len(text.encode("utf-8", "surrogatepass")) + vec.nbytes
        if size > self._max_bytes:
            return  # alone over the cap: answered, never cached
        old = self._cache.pop(text, None)
        if old is not None:
            self._bytes -= old[1]
        self._cache[text] = (vec, size)
        self._bytes += size
        while len(self._cache) > self._max or self._bytes > self._max_bytes:
            _, (_, freed) = self._cache.popitem(last=False)
            self._bytes -= freed


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _turn_text(events: Sequence[Event], first: int, last: int) -> str:
    return " ".join(
        e.text
        for e in events[first : last + 1]
        if e.type == "message" and e.role in ("user", "model") and e.text
    )


def topic_shifts(
    events: Sequence[Event], turns: Sequence[tuple[int, int]], threshold: float, encode: Encode
) -> list[Boundary]:
    """Where the topic shifts: between consecutive windows of turns (the last
    ``TOPIC_CONTEXT`` turns of the current segment, the next ``TOPIC_AHEAD``), the cosine
    similarity of their mean vectors drops below ``threshold`` and is a local minimum
    (as in TextTiling): so a shift is only called once the turns after it confirm it,
    and one off-topic aside is not a new segment."""
    texts = [_turn_text(events, a, b) for a, b in turns]
    usable = [k for k, t in enumerate(texts) if len(t.split()) >= MIN_TOPIC_WORDS]
    if len(usable) < 1 + TOPIC_AHEAD:
        return []
    vectors = np.stack(
        [_unit(v) for v in np.asarray(encode([texts[k] for k in usable]), dtype=np.float32)]
    )
    out: list[Boundary] = []
    start = 0  # the current segment's first usable turn

    def gap(k: int) -> float:
        left = vectors[max(start, k - TOPIC_CONTEXT) : k].mean(axis=0)
        return float(_unit(left) @ _unit(vectors[k : k + TOPIC_AHEAD].mean(axis=0)))

    # gap(k) needs TOPIC_AHEAD turns from k and, to be a minimum, gap(k + 1) too.
    for k in range(1, len(usable) - TOPIC_AHEAD):
        if k <= start:
            continue
        here = gap(k)
        if here < threshold and (k - 1 <= start or here <= gap(k - 1)) and here <= gap(k + 1):
            out.append(Boundary(turns[usable[k]][0], "topic_shift"))
            start = k
    return out


def find_boundaries(
    events: Sequence[Event],
    turns: Sequence[tuple[int, int]],
    kinds: Sequence[str],
    *,
    threshold: float,
    encode: Encode | None,
) -> list[Boundary]:
    """Every boundary of the wanted ``kinds`` in ``events`` (``turns``: invocation ranges),
    sorted by position; where two coincide the first kind found stays."""
    found: dict[int, Boundary] = {}
    for k, (first, last) in enumerate(turns):
        if "phrase" in kinds and any(says_move_on(e) for e in events[first : last + 1]):
            found.setdefault(first, Boundary(first, "phrase"))
        if (
            "task_done" in kinds
            and k + 1 < len(turns)
            and any(marks_task_done(e) for e in events[first : last + 1])
        ):
            found.setdefault(turns[k + 1][0], Boundary(turns[k + 1][0], "task_done"))
    if "topic_shift" in kinds:
        for b in topic_shifts(events, turns, threshold, encode or hashed_encode):
            found.setdefault(b.index, b)
    return sorted(found.values(), key=lambda b: b.index)
