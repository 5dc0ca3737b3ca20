"""Background workers: a debounced one (many pokes, one run at a time) and a periodic one.

The debounced worker serves the jobs that follow commits but must never
hold up a writer: refreshing the human checkout, catching the index up,
consolidating packs. Jobs that are cheaper done in bulk can ask to wait for
a pause in the pokes (``max_wait``), so a burst of commits costs one run
instead of dozens. The periodic worker serves a server's rounds on a fixed
interval (syncing remotes, scanning for overdue acknowledgements).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, Self

_log = logging.getLogger("gitmail.storage.background")


class Timer(Protocol):
    """Where a worker's pauses come from: the system's clock, or a test's stand-in that it steps by hand."""

    def monotonic(self) -> float: ...

    def pause(self, seconds: float, interrupt: threading.Event, /) -> None:
        """Return after ``seconds``, or as soon as ``interrupt`` is set."""


class SystemTimer:
    """Pauses on the system's monotonic clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def pause(self, seconds: float, interrupt: threading.Event, /) -> None:
        interrupt.wait(seconds)


class Debounced:
    """Runs ``job`` in a daemon thread at most once per ``delay`` after a poke.

    With ``max_wait``, a run waits until ``delay`` seconds pass without a poke,
    but never longer than ``max_wait`` after the first one.

    With ``min_interval``, a run starts at least that long after the previous
    one started: the first poke after a quiet spell is served after ``delay``
    as before, but while pokes keep coming (a burst of commits) the runs
    space out and each takes in several, so their fixed cost is paid once
    per interval instead of once per poke.
    """

    def __init__(self, name: str, job: Callable[[], None], delay: float = 0.05, max_wait: float | None = None, *,
                 min_interval: float = 0.0, timer: Timer | None = None):
        self.name = name
        self.job = job
        self.delay = delay
        self.max_wait = max_wait
        self.min_interval = min_interval
        self._last_start: float | None = None
        self.timer: Timer = timer or SystemTimer()
        self._changed = threading.Condition()
        self._pokes = 0  # pokes so far...
        self._served = 0  # ...and how many of them the runs finished so far have served
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def poke(self) -> None:
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._pokes += 1
            self._changed.notify_all()

    def _loop(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._stopping.is_set() or self._pokes != self._served)
            self._settle()
            self._space_out()
            if self._stopping.is_set():
                return  # a run still waiting for its pause is dropped: the work it would do is derived
            with self._changed:
                serves = self._pokes  # every poke so far is served by this run; later ones want another
            self._last_start = self.timer.monotonic()
            try:
                self.job()
            except Exception:  # noqa: BLE001 - a failed run is retried on the next poke
                _log.exception("%s failed", self.name)
            with self._changed:
                self._served = serves
                self._changed.notify_all()

    def _settle(self) -> None:
        began = self.timer.monotonic()
        while not self._stopping.is_set():
            with self._changed:
                before = self._pokes
            self.timer.pause(self.delay, self._stopping)
            with self._changed:
                quiet = self._pokes == before
            if self.max_wait is None or quiet or self.timer.monotonic() - began >= self.max_wait:
                return

    def _space_out(self) -> None:
        """Pause until ``min_interval`` has passed since the previous run started (no pause for the first)."""
        if self._last_start is None or self._stopping.is_set():
            return
        left = self._last_start + self.min_interval - self.timer.monotonic()
        if left > 0:
            self.timer.pause(left, self._stopping)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is pending or running (for shutdown and tests); False if ``timeout`` ran out."""
        with self._changed:
            return self._changed.wait_for(lambda: self._served == self._pokes, timeout)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def finish(self, timeout: float = 30.0) -> None:
        """Stop the worker, then run the job once in the caller if a poke is still unserved.

        For a process about to exit: the daemon thread would die with it, and
        work a commit asked for would be lost until some later process.
        """
        self.stop(timeout)
        with self._changed:
            owed = self._pokes
            if owed == self._served:
                return
        try:
            self.job()
        except Exception:  # noqa: BLE001 - the work is derived; the next process does it
            _log.exception("%s failed", self.name)
        with self._changed:
            self._served = owed
            self._changed.notify_all()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker: a run in progress finishes, one still in its pause does not start."""
        with self._changed:
            self._stopping.set()
            self._changed.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


class Periodic:
    """Runs :meth:`run_round` every ``interval`` seconds in a daemon thread, from ``start()`` to ``stop()``.

    A round that raises is logged to ``log`` with ``failure`` and the next
    one runs as planned: a bug in one round never ends the rounds.
    """

    def __init__(self, name: str, interval: float, *, log: logging.Logger, failure: str):
        self.name = name
        self.interval = interval
        self._log = log
        self._failure = failure
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_round(self) -> object:
        """One round; subclasses say what it does."""
        raise NotImplementedError

    def start(self) -> Self:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_round()
            except Exception:  # noqa: BLE001 - a bug in one round must not end the rounds
                self._log.exception(self._failure)
