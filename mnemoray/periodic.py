"""Run a function every interval on a daemon thread until stopped.

The loop several components share (the snapshot watcher, recall-usage flushes, metrics
pushes, job heartbeats), in one place: a tick that raises is logged (or handed to
``on_error``) and the next tick runs on time; ``stop()`` wakes the thread at once and
joins it, unless called from the thread itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mnemoray.errors import InvalidInput

log = logging.getLogger(__name__)


class Periodic:
    """``fn()`` every ``interval_s`` seconds (the first call one interval after start)."""

    def __init__(
        self,
        fn: Callable[[], object],
        interval_s: float,
        name: str,
        *,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise InvalidInput(f"must be > 0, got {interval_s!r}", field="interval_s")
        self.fn = fn
        self.interval_s = interval_s
        self.name = name
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> Periodic:
        """Start the thread (a second start while running does nothing)."""
        with self._lock:
            if self._thread is None:
                # An event per thread: a loop still finishing a long tick after stop()
                # timed out stays stopped when a new one starts.
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._loop, args=(self._stop,), name=self.name, daemon=True
                )
                self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        with self._lock:
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            try:
                self.fn()
            except Exception as exc:  # one failed tick must not end the loop
                if self._on_error is not None:
                    self._on_error(exc)
                else:
                    log.exception("%s: tick failed", self.name)
