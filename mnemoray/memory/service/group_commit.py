"""Group commit: concurrent online adds share one store commit.

Each commit pays a fixed cost (the store lock, a segment per shard touched, fsyncs, a
manifest rename, a snapshot reload) whatever it carries. So adds that arrive while a
commit runs wait for it, and then the first of them commits all of them at once
(:mod:`mnemoray.coalesce`): one commit for whatever queued meanwhile, no timer, no added
latency when alone. Every caller returns only after the commit that holds its memories
is durable, with what it wrote, as if it had committed alone in its turn (a memory two
callers add at once is written once, for the one queued first).

A batch that fails is retried one caller at a time, so one caller's bad memories (an
id already holding other content) fail only that caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mnemoray.coalesce import Coalescer, RunInterrupted
from mnemoray.memory.records.record import Memory

#: Commits ``memories`` (embedding what has no vector), returns the rows written:
#: each written content hash once.
CommitMemories = Callable[[list[Memory]], list[Memory]]


class CommitInterrupted(RunInterrupted):
    """The commit holding these memories was interrupted (the leading thread got a
    KeyboardInterrupt or SystemExit): they may or may not be stored; adding them again is
    safe (a stored copy is skipped)."""


class GroupCommit:
    """Coalesces concurrent :meth:`submit` calls into commits through ``commit``."""

    def __init__(self, commit: CommitMemories) -> None:
        self._commit = commit
        self._runs: Coalescer[list[Memory], list[Memory]] = Coalescer(
            self._commit_all, lambda: CommitInterrupted("the commit was interrupted")
        )

    @property
    def commits(self) -> int:
        """Commits run (for tests and metrics)."""
        return self._runs.runs

    @property
    def batched(self) -> int:
        """Callers whose memories shared a commit with another's."""
        return self._runs.batched

    @property
    def queued(self) -> int:
        """Adds waiting for a commit to start."""
        return self._runs.queued

    def submit(self, memories: Sequence[Memory]) -> list[Memory]:
        """Commit ``memories`` (alone or with others queued meanwhile); the ones this
        call wrote, in its order. Raises what its commit raised."""
        return self._runs.submit(list(memories))

    def _commit_all(self, batch: Sequence[list[Memory]]) -> list[list[Memory]]:
        written = self._commit([m for memories in batch for m in memories])
        by_hash = {m.content_hash: m for m in written}
        out: list[list[Memory]] = []
        for memories in batch:  # each row to the first caller that asked for it
            mine = [by_hash.pop(m.content_hash) for m in memories if m.content_hash in by_hash]
            out.append(mine)
        return out
