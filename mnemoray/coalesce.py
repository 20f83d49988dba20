"""Coalescing: concurrent calls of one costly step share one run of it.

A call that arrives while a run is going on (or ``max_runs`` of them) waits; when a run
ends, the first waiting caller runs the step once for every request queued meanwhile.
No timer, so a caller alone pays nothing; each caller returns its own part of the
result, as if it had run alone. Used by the online write path: the store commit
(``GroupCommit``) and the model call that embeds what is written
(``mnemoray.embedders.coalesced``).

A run that fails is repeated one request at a time, so one caller's bad request fails
only that caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from mnemoray.errors import Unavailable

Request = TypeVar("Request")
Result = TypeVar("Result")


class RunInterrupted(Unavailable):
    """The run holding this request was interrupted (the leading thread got a
    KeyboardInterrupt or SystemExit): its effect may or may not have happened."""


@dataclass(eq=False)
class _Waiter(Generic[Request, Result]):
    request: Request
    taken: bool = False
    done: bool = False
    result: Result | None = None
    error: BaseException | None = None


class Coalescer(Generic[Request, Result]):
    """Coalesces concurrent :meth:`submit` calls into runs of ``run_batch`` (the step
    for several requests: one result per request, in their order), at most ``max_runs``
    at once (a request waits only while that many run).

    ``interrupted``: the error a caller gets when the leader's run was interrupted."""

    def __init__(
        self,
        run_batch: Callable[[Sequence[Request]], list[Result]],
        interrupted: Callable[[], Exception] = lambda: RunInterrupted("the run was interrupted"),
        *,
        max_runs: int = 1,
    ) -> None:
        if max_runs < 1:
            raise ValueError(f"max_runs must be >= 1, got {max_runs}")
        self._run_batch = run_batch
        self._interrupted = interrupted
        self._max_runs = max_runs
        self._cond = threading.Condition()
        self._queue: list[_Waiter[Request, Result]] = []
        self._running = 0
        self.runs = 0  # runs of the step (for tests and metrics)
        self.batched = 0  # requests that shared a run with another

    @property
    def queued(self) -> int:
        """Requests waiting for a run to start."""
        with self._cond:
            return len(self._queue)

    def submit(self, request: Request) -> Result:
        """Run the step for ``request`` (alone or with others queued meanwhile); its
        result. Raises what its run raised."""
        me: _Waiter[Request, Result] = _Waiter(request)
        with self._cond:
            self._queue.append(me)
            # Taken: in another leader's run, which marks it done at its end.
            while not me.done and (me.taken or self._running >= self._max_runs):
                self._cond.wait()
            if not me.done:
                # A run is free and this request is still queued: lead one for the queue.
                self._running += 1
                batch, self._queue = self._queue, []
                for w in batch:
                    w.taken = True
        if not me.done:
            try:
                self._run(batch)
            finally:
                with self._cond:
                    # Interrupted (KeyboardInterrupt, SystemExit): the rest of the batch
                    # learns it did not run to its end; the leader raises the interruption.
                    for w in batch:
                        if not w.done:
                            w.error = self._interrupted()
                            w.done = True
                    self._running -= 1
                    self._cond.notify_all()
        if me.error is not None:
            raise me.error
        return me.result  # type: ignore[return-value]  # set with done, error unset

    def _run(self, batch: list[_Waiter[Request, Result]]) -> None:
        with self._cond:
            self.runs += 1
            if len(batch) > 1:
                self.batched += len(batch)
        try:
            results = self._run_batch([w.request for w in batch])
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error, batch[0].done = exc, True
                return
            # Whose request failed it: each alone.
            for w in batch:
                try:
                    with self._cond:
                        self.runs += 1
                    w.result = self._run_batch([w.request])[0]
                except Exception as one:  # noqa: BLE001 - handed to that caller
                    w.error = one
                w.done = True
            return
        if len(results) != len(batch):
            # The step ran (its effects may stand): no retry, every caller learns it.
            wrong = RuntimeError(f"{len(results)} results for {len(batch)} requests")
            for w in batch:
                w.error, w.done = wrong, True
            return
        for w, result in zip(batch, results, strict=True):
            w.result, w.done = result, True


__all__ = ["Coalescer", "RunInterrupted"]
