"""What each record's words say of time, resolved once per record and kept with the
loaded segment that holds it.

Resolving a record's words (:func:`mnemoray.memory.recall.axes.time_facts`, a dozen regex scans
over its key text) is what the time axis costs per record, and the answer depends on the
record alone (its words and its own date). Candidate sets come and go (a user's set is
rebuilt after every write to the user, an app's set spans many users) while a segment
stays loaded as long as it is committed, so the answers live with the segment: a record
is resolved at most once however many sets look at it.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from mnemoray.memory.recall.axes import TimeFacts, time_facts
from mnemoray.weighed_cache import WeighedCache

# Per loaded segment (by id, dropped when the segment is): one slot per row, None until
# that row's words are resolved.
_BY_SEGMENT: dict[int, list[TimeFacts | None]] = {}
_LOCK = threading.Lock()
# A candidate set's view: per position, its segment's slots and its row there.
SetSlots = tuple[list[list[TimeFacts | None]], list[int]]
_queued: queue.SimpleQueue = queue.SimpleQueue()  # sets to resolve in the background
_worker: threading.Thread | None = None
log = logging.getLogger(__name__)


def segment_slots(segment: object, rows: int) -> list[TimeFacts | None]:
    """The time facts slots of ``segment``'s ``rows`` rows, kept while it is alive.
    Two threads may resolve the same row at once: both write the same answer."""
    key = id(segment)
    with _LOCK:
        found = _BY_SEGMENT.get(key)
        if found is None:
            found = _BY_SEGMENT[key] = [None] * rows
            weakref.finalize(segment, _BY_SEGMENT.pop, key, None)
    return found


def set_slots(parts: Iterable[tuple[Any, int, int, np.ndarray | None]]) -> SetSlots:
    """The slots of a set built from ``parts``: (loaded segment, start row, end row, live
    rows relative to start, None for all), in the set's order."""
    slots: list[list[TimeFacts | None]] = []
    rows: list[int] = []
    for seg, start, end, local in parts:
        kept = segment_slots(seg, seg.rows)
        span = range(start, end) if local is None else (local + start).tolist()
        slots.extend([kept] * len(span))
        rows.extend(span)
    return slots, rows


def resolve_all_later(found: SetSlots, texts: Any, references: np.ndarray) -> threading.Event:
    """Resolve a set's records on a background thread; the event is set once done.

    Off the request path: the set's first recall resolves only the records it looks at
    (a few hundred, as they are asked), its later ones find every record done. Inline,
    a user's first recall with a time intent paid for all of the user's records. One
    thread for every set: it competes with requests for one core at most. A daemon: an
    exit does not wait for sets nobody will ask again. ``texts`` (the set's key text
    column) and ``references`` (its dates) are the set's own arrays: a queue of many new
    sets holds no copies of their texts."""
    return _later(lambda: resolve_all(found, texts.to_pylist(), references.tolist()))


def background_idle(timeout: float | None = None) -> bool:
    """Wait until every set queued so far is resolved (one worker, in order)."""
    return _later(lambda: None).wait(timeout)


def _later(work: Callable[[], None]) -> threading.Event:
    global _worker
    done = threading.Event()
    with _LOCK:
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_run_queued, name="mnemoray-times", daemon=True)
            _worker.start()
    _queued.put((work, done))
    return done


def _run_queued() -> None:
    while True:
        work, done = _queued.get()
        try:
            work()
        except Exception:  # a bad record: its recall resolves it inline and says so
            log.exception("mnemoray: resolving a candidate set's time facts failed")
        finally:
            done.set()


def resolve_all(found: SetSlots, texts: list[str | None], references: list[float]) -> None:
    """Resolve every position of a set not resolved yet (``texts``, ``references``: its
    key texts and dates, by position)."""
    slots, rows = found
    for pos, (kept, row) in enumerate(zip(slots, rows, strict=True)):
        if kept[row] is None:
            kept[row] = time_facts(texts[pos] or "", references[pos])


# For sets that are not kept: a transient set is built anew every recall (app-wide: the
# nearest records by ANN), and much the same records come back recall after recall: it
# reads their words through this cache. Keyed by what the answer depends on (key text,
# date), so it is exact whichever record the words belong to; by a digest of the text, so
# the cache does not keep the texts (up to 32,000 characters each) alive after their sets
# are gone.
RECENT_TIME_FACTS = 20_000
_recent: WeighedCache[tuple[bytes, float], TimeFacts] = WeighedCache(RECENT_TIME_FACTS)


def recent_time_facts(key_text: str, reference: float) -> TimeFacts:
    digest = hashlib.blake2b(key_text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    key = (digest, reference)
    found = _recent.get(key)
    return found if found is not None else _recent.put(key, time_facts(key_text, reference))
