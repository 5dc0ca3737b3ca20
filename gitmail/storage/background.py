"""A debounced background worker: many pokes, one run at a time.

Used for the jobs that follow commits but must never hold up a writer:
refreshing the human checkout, catching the index up, consolidating packs.
Jobs that are cheaper done in bulk can ask to wait for a pause in the pokes
(``max_wait``), so a burst of commits costs one run instead of dozens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

_log = logging.getLogger("gitmail.storage.background")


class Debounced:
    """Runs ``job`` in a daemon thread at most once per ``delay`` after a poke.

    With ``max_wait``, a run waits until ``delay`` seconds pass without a poke,
    but never longer than ``max_wait`` after the first one.
    """

    def __init__(self, name: str, job: Callable[[], None], delay: float = 0.05, max_wait: float | None = None):
        self.name = name
        self.job = job
        self.delay = delay
        self.max_wait = max_wait
        self._wanted = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
        self._idle.clear()
        self._wanted.set()

    def _loop(self) -> None:
        while not self._stop:
            self._wanted.wait()
            if self._stop:
                break
            self._settle()
            try:
                self.job()
            except Exception:  # noqa: BLE001 - a failed run is retried on the next poke
                _log.exception("%s failed", self.name)
            if not self._wanted.is_set():
                self._idle.set()

    def _settle(self) -> None:
        began = time.monotonic()
        while True:
            self._wanted.clear()
            time.sleep(self.delay)
            if (self._stop or self.max_wait is None or not self._wanted.is_set()
                    or time.monotonic() - began >= self.max_wait):
                self._wanted.clear()  # pokes that came meanwhile are served by this run
                return

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is pending or running (for shutdown and tests)."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker, letting a run in progress finish first."""
        self._stop = True
        self._wanted.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
