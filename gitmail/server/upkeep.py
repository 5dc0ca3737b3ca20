"""Memory upkeep of a long-running server: a full collection and a trim of the C heap, every half minute.

Two things let a server's resident memory creep up under steady traffic
although what it holds stays the same size. Python collects its oldest
generation only once the objects that survived earlier collections have grown
by a quarter, so reference cycles left by finished requests pile up for long
stretches, and the heap they spread over keeps growing. And glibc keeps the
memory freed into its arenas for later use instead of handing it back.

:class:`Upkeep` runs both remedies on a timer in a daemon thread: a full
``gc.collect()``, then ``malloc_trim(0)`` where the C library has it. Under
``benchmarks/soak.py`` (16 clients, 20,000 messages in one day, the same
machine and load) the server's growth from the second decile to the end went
from 84 MB to 33 MB with a round every half minute (65 MB at one a minute,
under the same load); one round costs 130–190 ms of CPU, half a percent of
one core at this pace.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

UPKEEP_SECONDS = 30.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpkeepRound:
    """What one round did: objects the collection freed, whether the C heap was trimmed, and its CPU."""

    collected: int
    trimmed: bool
    cpu_ms: float


def _trimmer() -> Callable[[], bool] | None:
    """glibc's ``malloc_trim(0)`` (hands freed heap pages back), or None on another C library."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "malloc_trim"):
        return None
    trim = libc.malloc_trim
    return lambda: bool(trim(0))


class Upkeep:
    """Runs :meth:`run_once` every ``every`` seconds in a daemon thread, from :meth:`start` to :meth:`stop`."""

    def __init__(self, every: float = UPKEEP_SECONDS):
        self.every = every
        self.rounds = 0
        self.last: UpkeepRound | None = None
        self.ran = threading.Event()  # set after each round (tests wait on it instead of on the clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._trim = _trimmer()

    def run_once(self) -> UpkeepRound:
        """One round: collect every generation, then trim the C heap."""
        start = time.process_time()
        collected = gc.collect()
        trimmed = self._trim() if self._trim is not None else False
        done = UpkeepRound(collected=collected, trimmed=trimmed, cpu_ms=(time.process_time() - start) * 1000)
        self.last, self.rounds = done, self.rounds + 1
        self.ran.set()
        return done

    def start(self) -> Upkeep:
        self._thread = threading.Thread(target=self._loop, name="gitmail-upkeep", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - upkeep must never end the server
                _log.exception("memory upkeep failed")
