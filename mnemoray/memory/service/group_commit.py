"""Group commit: concurrent online adds share one store commit.

Each commit pays a fixed cost (the store lock, a segment per shard touched, fsyncs, a
manifest rename, a snapshot reload) whatever it carries. So adds that arrive while a
commit runs wait for it, and then the first of them commits all of them at once: one
commit for whatever queued meanwhile, no timer, no added latency when alone. Every
caller returns only after the commit that holds its memories is durable, with what it
wrote, as if it had committed alone in its turn (a memory two callers add at once is
written once, for the one queued first).

A batch that fails is retried one caller at a time, so one caller's bad memories (an
id already holding other content) fail only that caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mnemoray.errors import Unavailable
from mnemoray.memory.records.record import Memory

#: Commits ``memories`` (embedding what has no vector), returns the rows written:
#: each written content hash once.
CommitMemories = Callable[[list[Memory]], list[Memory]]


class CommitInterrupted(Unavailable):
    """The commit holding these memories was interrupted (the leading thread got a
    KeyboardInterrupt or SystemExit): they may or may not be stored; adding them again is
    safe (a stored copy is skipped)."""


@dataclass(eq=False)
class _Waiter:
    memories: list[Memory]
    done: bool = False
    written: list[Memory] = field(default_factory=list)
    error: BaseException | None = None


class GroupCommit:
    """Coalesces concurrent :meth:`submit` calls into commits through ``commit``."""

    def __init__(self, commit: CommitMemories) -> None:
        self._commit = commit
        self._cond = threading.Condition()
        self._queue: list[_Waiter] = []
        self._committing = False
        self.commits = 0  # commits run (for tests and metrics)
        self.batched = 0  # callers whose memories shared a commit with another's

    def submit(self, memories: Sequence[Memory]) -> list[Memory]:
        """Commit ``memories`` (alone or with others queued meanwhile); the ones this
        call wrote, in its order. Raises what its commit raised."""
        me = _Waiter(list(memories))
        with self._cond:
            self._queue.append(me)
            while self._committing and not me.done:
                self._cond.wait()
            if not me.done:
                # The previous commit is over and this waiter's is not done: lead the next.
                self._committing = True
                batch, self._queue = self._queue, []
        if not me.done:
            try:
                self._run(batch)
            finally:
                with self._cond:
                    # Interrupted (KeyboardInterrupt, SystemExit): the rest of the batch
                    # learns it was not committed; the leader raises the interruption.
                    for w in batch:
                        if not w.done:
                            w.error = CommitInterrupted("the commit was interrupted")
                            w.done = True
                    self._committing = False
                    self._cond.notify_all()
        if me.error is not None:
            raise me.error
        return me.written

    def _run(self, batch: list[_Waiter]) -> None:
        self.commits += 1
        if len(batch) > 1:
            self.batched += len(batch)
        try:
            written = self._commit([m for w in batch for m in w.memories])
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error, batch[0].done = exc, True
                return
            # Whose memories failed it: each alone (nothing was published, see the store).
            for w in batch:
                try:
                    self.commits += 1
                    w.written = self._commit(w.memories)
                except Exception as one:  # noqa: BLE001 - handed to that caller
                    w.error = one
                w.done = True
            return
        by_hash = {m.content_hash: m for m in written}
        for w in batch:
            for m in w.memories:
                row = by_hash.pop(m.content_hash, None)
                if row is not None:
                    w.written.append(row)
            w.done = True
